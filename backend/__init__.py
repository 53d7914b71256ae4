"""core-textmodels: chat completions (tools, streaming), groundedness checks and
query/passage embeddings, in-process on local models or over HTTP.

>>> import backend
>>> service = backend.connect()                       # in-process, embedded models
>>> reply = service.chat({"model": "core-1-mini-chat",
...                       "messages": [{"role": "user", "content": "Hello!"}]})
>>> remote = backend.connect(base_url="http://127.0.0.1:8000", api_key="...")  # HTTP

The rooms: ``protocol`` (the API as data), ``engines`` (models), ``chat``, ``groundedness`` and
``embeddings`` (the service's capabilities above the engines), ``local`` (the in-process
backend), ``client`` (the HTTP backend), ``server``, ``bulk`` and ``testing`` (shipped test
doubles); docs/architecture.md walks through them.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field, SecretStr

from backend.client.http import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from backend.interface import AsyncChatStream, Backend, ChatStream
from backend.protocol.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    CoreError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
    RequestTooLargeError,
    ServiceUnavailableError,
)

__all__ = [
    "ConnectionSettings",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncChatStream",
    "AuthenticationError",
    "Backend",
    "BadRequestError",
    "ChatStream",
    "CoreError",
    "InternalServerError",
    "NotFoundError",
    "RateLimitError",
    "RequestTooLargeError",
    "ServiceUnavailableError",
    "connect",
    "connect_shared",
]


BASE_URL_ENV = "CORE_BASE_URL"
API_KEY_ENV = "CORE_API_KEY"


def connect(base_url: str | None = None, api_key: str | None = None, **options: Any) -> Backend:
    """Return a ``Backend``: over HTTP when a base URL is given (or ``CORE_BASE_URL`` is set),
    else the in-process engine.

    Args:
        base_url: the server's address, e.g. ``http://127.0.0.1:8000``.
        api_key: the bearer key for the server (default ``CORE_API_KEY``).
        **options: for HTTP, client options (``timeout``, ``max_retries``...); in-process,
            ``EngineConfig`` fields (``profile="small"``, ``chat_model=...``, ``device=...``).
    """
    base_url = base_url or _env_base_url()
    if base_url:
        from backend.client import HTTPBackend

        return HTTPBackend(
            base_url=base_url, api_key=api_key or os.environ.get(API_KEY_ENV), **options
        )
    from backend.local import InProcessBackend

    return InProcessBackend(**options)


def connect_shared(
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> Backend:
    """The backend an adapter uses: the server at ``base_url`` (``CORE_BASE_URL``), else a
    handle on the in-process backend this process shares among everything built with the same
    engine settings (from the ``CORE_*`` variables), so models load once.

    ``timeout`` and ``max_retries`` concern the HTTP client only: in-process there is no
    connection to time out or retry. Closing the result closes the client, or gives up the
    handle (closing the last one frees the shared models).
    """
    if base_url or _env_base_url():
        return connect(base_url, api_key, timeout=timeout, max_retries=max_retries)
    from backend.local.shared import shared_backend

    return shared_backend()


def _env_base_url() -> str | None:
    return os.environ.get(BASE_URL_ENV) or None


def _env_api_key() -> SecretStr | None:
    value = os.environ.get(API_KEY_ENV)
    return SecretStr(value) if value else None


class ConnectionSettings(BaseModel):
    """A server to send requests to over HTTP, or none: the models run in this process.

    Args:
        base_url: the server's address (default ``CORE_BASE_URL``); None runs the models in
            this process, shared with everything else built with the same engine settings.
        api_key: bearer key (default ``CORE_API_KEY``); never serialised.
        timeout / max_retries: for the HTTP client, which alone retries (HTTP only).
    """

    base_url: str | None = Field(
        default_factory=_env_base_url,
        description="Server address, e.g. http://127.0.0.1:8000 (default: CORE_BASE_URL); "
        "unset means the in-process models.",
    )
    api_key: SecretStr | None = Field(
        default_factory=_env_api_key,
        exclude=True,
        description="Bearer key for the server (default: CORE_API_KEY).",
    )
    timeout: float = Field(
        default=DEFAULT_TIMEOUT, gt=0.0, description="Seconds per HTTP read or write (HTTP only)."
    )
    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES,
        ge=0,
        description="Retries of the HTTP client after the first attempt (HTTP only).",
    )

    def connect(self) -> Backend:
        """The HTTP client for ``base_url``, or a handle on the shared in-process backend
        (``backend.connect_shared``)."""
        return connect_shared(
            self.base_url,
            self.api_key.get_secret_value() if self.api_key else None,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
