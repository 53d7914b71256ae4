"""Typed errors shared by the in-process backend, the HTTP client and the server.

Every error carries the HTTP status the server answers with and the spec's error object
(section 2.8), so the same exception type reaches the caller whether the model ran in this
process or behind a server. The server maps them to responses in one place
(``backend.server.errors``); the HTTP client maps statuses back with ``error_for_status``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from backend.protocol.schemas import ErrorBody, ErrorResponse


class CoreError(Exception):
    """Base class: an error with a status code and the spec's error object."""

    status_code: ClassVar[int | None] = None
    error_type: ClassVar[str] = "server_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        if error_type is not None:
            self.error_type = error_type

    @property
    def body(self) -> ErrorResponse:
        """The error object as the server sends it: ``{"error": {...}}``."""
        return ErrorResponse(
            error=ErrorBody(
                message=self.message, type=self.error_type, param=self.param, code=self.code
            )
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status_code}, message={self.message!r})"


class APIStatusError(CoreError):
    """An error the service answered with a status code."""


class BadRequestError(APIStatusError):
    status_code = 400
    error_type = "invalid_request_error"


class AuthenticationError(APIStatusError):
    status_code = 401
    error_type = "authentication_error"


class NotFoundError(APIStatusError):
    status_code = 404
    error_type = "invalid_request_error"


class RequestTooLargeError(APIStatusError):
    status_code = 413
    error_type = "invalid_request_error"


class RetryAfterError(APIStatusError):
    """A status that says when to try again: ``retry_after`` seconds (``Retry-After``)."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class RateLimitError(RetryAfterError):
    status_code = 429
    error_type = "rate_limit_error"


class InternalServerError(APIStatusError):
    status_code = 500
    error_type = "server_error"


class NotImplementedByBackendError(APIStatusError):
    """What this backend cannot do (counting tokens without the model's tokenizer)."""

    status_code = 501
    error_type = "server_error"


class ServiceUnavailableError(RetryAfterError):
    status_code = 503
    error_type = "service_unavailable_error"


class APIConnectionError(CoreError):
    """The server could not be reached or the connection broke (no status)."""

    error_type = "connection_error"


class APITimeoutError(APIConnectionError):
    """The request took longer than the configured timeout."""

    error_type = "timeout_error"


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    413: RequestTooLargeError,
    422: BadRequestError,
    429: RateLimitError,
    500: InternalServerError,
    501: NotImplementedByBackendError,
    503: ServiceUnavailableError,
}


def error_for_status(status: int, body: Any, *, retry_after: float | None = None) -> APIStatusError:
    """Build the typed error for an HTTP status and a (possibly malformed) error body."""
    message, error_type, param, code = f"HTTP {status}", None, None, None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        message = str(error.get("message") or message)
        error_type, param, code = error.get("type"), error.get("param"), error.get("code")
    elif isinstance(body, str) and body:
        message = body
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = InternalServerError if status >= 500 else BadRequestError
    kwargs: dict[str, Any] = {"param": param, "code": code, "error_type": error_type}
    if issubclass(cls, RetryAfterError):
        kwargs["retry_after"] = retry_after
    err = cls(message, **kwargs)
    if cls.status_code != status:
        err.status_code = status  # keep the real status for unusual codes (402, 409, 502, ...)
    return err
