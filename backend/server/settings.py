"""Server settings, from arguments or ``CORE_SERVER_*`` environment variables.

Environment variables (arguments win):

* ``CORE_SERVER_MAX_BODY_BYTES``: largest request body accepted (default 8 MiB); larger: 413.
* ``CORE_SERVER_MAX_MESSAGES``: messages in one chat request (default 2048, OpenAI's cap);
  more: 400 before any of them is validated.
* ``CORE_SERVER_MAX_CONCURRENT``: model requests running at once (default 16): the chat
  engine decodes concurrent requests together and embedding requests are combined, so
  more places mean larger batches; requests beyond the engine's own limit wait there.
* ``CORE_SERVER_MAX_CONCURRENT_STREAMS``: streamed chat responses open at once, waiting or
  sending (default 32); beyond: 429 with ``Retry-After``.
* ``CORE_SERVER_MAX_QUEUED``: model requests waiting for a place (default 64); beyond: 429.
* ``CORE_SERVER_REQUEST_TIMEOUT``: seconds a model request may take, waiting included
  (default 600); a stream that runs longer ends with an error event.
* ``CORE_SERVER_KEEP_ALIVE_INTERVAL``: seconds between ``: keep-alive`` comments while a
  stream waits for the model (default 10).
* ``CORE_SERVER_SHUTDOWN_DRAIN_TIMEOUT``: seconds in-flight requests get to finish on
  shutdown (default 30); new model requests get 503 meanwhile.
* ``CORE_SERVER_RETRY_AFTER``: the ``Retry-After`` seconds sent with 429 and 503 (default 1).
* ``CORE_SERVER_SERVED_BY``: the ``x-served-by`` header on every response, naming the replica
  that answered (default ``<hostname>:<pid>``; on Ray Serve, the replica's id).

Keys come from ``CORE_API_KEYS`` (comma-separated) and/or a key file (one per line, ``#``
comments); see ``backend.server.auth``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

ENV_PREFIX = "CORE_SERVER_"
_PARSERS = {"int": int, "float": float, "str": str}


def default_served_by() -> str:
    """``<hostname>:<pid>``: which process answered, when several serve one address."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class ServerSettings:
    max_body_bytes: int = 8 * 1024 * 1024
    max_messages: int = 2048
    max_concurrent: int = 16
    max_concurrent_streams: int = 32
    max_queued: int = 64
    request_timeout: float = 600.0
    keep_alive_interval: float = 10.0
    shutdown_drain_timeout: float = 30.0
    retry_after: float = 1.0
    #: The ``x-served-by`` header's value: the replica that answered.
    served_by: str = field(default_factory=default_served_by)
    #: Accepted bearer keys; never logged. Empty means no key can pass unless ``no_auth``.
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    #: Serve without authentication (explicit opt-in; the runner refuses to start with
    #: neither keys nor this).
    no_auth: bool = False

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_messages", "max_concurrent", "max_concurrent_streams"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_queued < 0:
            raise ValueError(f"max_queued must not be negative, got {self.max_queued}")
        for name in ("request_timeout", "keep_alive_interval", "shutdown_drain_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.retry_after < 0:
            raise ValueError(f"retry_after must not be negative, got {self.retry_after}")
        if not (self.served_by.isascii() and self.served_by.isprintable() and self.served_by):
            # It goes out as a header value: control characters would split the response.
            raise ValueError(f"served_by must be printable ASCII, got {self.served_by!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ServerSettings:
        """Defaults, then ``CORE_SERVER_*`` variables, then ``overrides`` (None ignored)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in ("api_keys", "no_auth"):
                continue
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw:
                try:
                    values[f.name] = _PARSERS[str(f.type)](raw)
                except ValueError as exc:
                    raise ValueError(
                        f"{ENV_PREFIX}{f.name.upper()} must be a number, got {raw!r}"
                    ) from exc
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown server settings: {', '.join(sorted(unknown))}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
