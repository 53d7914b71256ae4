"""When the HTTP client tries again, and the typed error of a failed attempt.

Connection errors, timeouts, 408, 409, 429 and 5xx are retried with exponential backoff and
jitter (at most ``MAX_RETRY_DELAY`` a wait), honouring ``Retry-After`` (openai-python's rules).
"""

from __future__ import annotations

import email.utils
import random
import time
from typing import Any

import httpx

from backend.protocol.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    CoreError,
    error_for_status,
)

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
#: A ``Retry-After`` longer than this is not waited for; the usual backoff applies instead.
MAX_RETRY_AFTER = 60.0
_RETRY_STATUSES = frozenset({408, 409, 429})


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    try:
        return float(headers["retry-after-ms"]) / 1000
    except (KeyError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def retry_delay(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number ``attempt + 1``."""
    if retry_after is not None and 0 <= retry_after <= MAX_RETRY_AFTER:
        return retry_after
    delay = min(INITIAL_RETRY_DELAY * 2**attempt, MAX_RETRY_DELAY)
    return delay * (1 - 0.25 * random.random())


def retryable(error: CoreError) -> bool:
    if isinstance(error, APIConnectionError):
        return True
    status = error.status_code or 0
    return status in _RETRY_STATUSES or status >= 500


def status_error(response: httpx.Response) -> APIStatusError:
    """The typed error of a response with an error status (its body read)."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return error_for_status(response.status_code, body, retry_after=retry_after(response.headers))


def transport_error(exc: httpx.TransportError) -> APIConnectionError:
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"the request timed out ({type(exc).__name__})")
    return APIConnectionError(f"could not reach the server: {exc}")
