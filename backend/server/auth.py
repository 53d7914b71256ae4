"""Bearer-key authentication for every ``/v1`` path.

Keys come from ``CORE_API_KEYS`` (comma-separated) and a key file (one key per line, blank
lines and ``#`` comments ignored):

* ``CORE_API_KEYS``: the keys the server accepts, comma-separated, besides those of
  ``--api-key-file`` (default: none; the server refuses to start without keys unless given
  ``--no-auth``).
 A presented key is compared with every accepted key in
constant time, so neither the match nor its position leaks through timing. Keys are never
logged or echoed in responses.

Which paths need a key is decided on a normalised path (percent-decoding repeated until stable,
backslashes as slashes, empty and dot segments resolved, case folded): any path with a ``v1``
segment in that form needs the key, so spellings such as ``//v1/core/models``,
``/v1/core/../core/models``, ``/V1/...`` or ``/%761/...`` cannot slip past the check while the
router still reaches an endpoint.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote

from backend.protocol.errors import AuthenticationError

API_KEYS_ENV = "CORE_API_KEYS"
PROTECTED_SEGMENT = "v1"
_MAX_DECODE_ROUNDS = 5


def load_api_keys(
    key_file: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Accepted keys from ``CORE_API_KEYS`` and ``key_file``, in that order, without repeats.

    Raises:
        FileNotFoundError: ``key_file`` was given but does not exist.
    """
    env = os.environ if env is None else env
    keys = [k.strip() for k in env.get(API_KEYS_ENV, "").split(",")]
    if key_file is not None:
        lines = Path(key_file).read_text(encoding="utf-8").splitlines()
        keys += [line.strip() for line in lines if not line.lstrip().startswith("#")]
    return tuple(dict.fromkeys(k for k in keys if k))


def normalise_path(path: str) -> str:
    """The path as a lenient router might read it: decoded, dot segments resolved, lower case."""
    for _ in range(_MAX_DECODE_ROUNDS):
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    segments: list[str] = []
    for segment in path.replace("\\", "/").split("/"):
        segment = segment.strip().lower()
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    return "/" + "/".join(segments)


def requires_key(path: str) -> bool:
    """Whether a request to ``path`` must carry a valid key (every ``/v1`` path does)."""
    return PROTECTED_SEGMENT in normalise_path(path).split("/")


class BearerAuth:
    """Checks ``Authorization: Bearer <key>`` against the accepted keys."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._keys = tuple(key.encode("utf-8") for key in keys)

    def check(self, authorization: str | None) -> None:
        """Return if the header carries an accepted key.

        Raises:
            AuthenticationError: the header is missing, malformed or has a wrong key; the
                message never repeats what was sent.
        """
        if not authorization or not authorization.strip():
            raise AuthenticationError(
                "missing API key: send it in the Authorization header as 'Bearer <API_KEY>'"
            )
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or " " in token:
            raise AuthenticationError("malformed Authorization header: expected 'Bearer <API_KEY>'")
        presented = token.encode("utf-8")
        matched = False
        for key in self._keys:  # every key, no early exit: timing says nothing about which
            matched |= hmac.compare_digest(presented, key)
        if not matched:
            raise AuthenticationError("invalid API key")
