"""The one place that turns exceptions into statuses and the spec's error object (2.8).

Typed ``CoreError`` subclasses carry their own status and body; framework exceptions (unknown
path, wrong method, FastAPI's validation errors) are mapped here; anything else is a 500 whose
body says nothing about internals and names the request id under which it was logged.
Middleware, exception handlers and the SSE stream all call ``to_core_error``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.errors import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    CoreError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
    ServiceUnavailableError,
    error_for_status,
)

logger = logging.getLogger("backend.server")


class MethodNotAllowedError(APIStatusError):
    status_code = 405
    error_type = "invalid_request_error"

    def __init__(self, message: str, *, allow: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.allow = allow


class RequestTimeoutError(APIStatusError):
    """The request ran past the server's request timeout."""

    status_code = 504
    error_type = "timeout_error"


def request_id_of(scope: Mapping[str, Any]) -> str:
    return str(scope.get("state", {}).get("request_id", "-"))


def _describe_validation(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    loc = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    message = str(first.get("msg", "is invalid")).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"invalid request: {loc + ': ' if loc else ''}{message}{more}"


def to_core_error(exc: BaseException, scope: Mapping[str, Any]) -> CoreError:
    """The typed error for any exception raised while serving ``scope``; logs the unexpected."""
    if isinstance(exc, CoreError):
        if isinstance(exc, InternalServerError):
            logger.error("request %s failed: %s", request_id_of(scope), exc.message)
        return exc
    if isinstance(exc, RequestValidationError):
        return BadRequestError(_describe_validation(exc))
    if isinstance(exc, StarletteHTTPException):
        where = f"{scope.get('method', '')} {str(scope.get('path', ''))[:200]}".strip()
        if exc.status_code == 404:
            return NotFoundError(f"unknown path: {where}")
        if exc.status_code == 405:
            allow = (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow")
            return MethodNotAllowedError(f"method not allowed: {where}", allow=allow)
        return error_for_status(exc.status_code, str(exc.detail))
    request_id = request_id_of(scope)
    logger.error("request %s failed", request_id, exc_info=exc)
    return InternalServerError(f"internal server error (request id {request_id})")


def error_headers(error: CoreError) -> dict[str, str]:
    headers: dict[str, str] = {}
    if isinstance(error, AuthenticationError):
        headers["WWW-Authenticate"] = "Bearer"
    retry_after = getattr(error, "retry_after", None)
    if isinstance(error, RateLimitError | ServiceUnavailableError) and retry_after is not None:
        headers["Retry-After"] = str(max(0, math.ceil(retry_after)))
    if isinstance(error, MethodNotAllowedError) and error.allow:
        headers["Allow"] = error.allow
    return headers


def error_response(error: CoreError) -> JSONResponse:
    status = error.status_code or 500
    return JSONResponse(
        error.body.model_dump(mode="json"), status_code=status, headers=error_headers(error)
    )


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    return error_response(to_core_error(exc, request.scope))


def install_exception_handlers(app: FastAPI) -> None:
    """Route every exception the framework sees through ``to_core_error``."""
    app.add_exception_handler(CoreError, _handle)
    app.add_exception_handler(RequestValidationError, _handle)
    app.add_exception_handler(StarletteHTTPException, _handle)
