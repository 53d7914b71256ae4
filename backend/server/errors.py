"""The one place that turns exceptions into statuses and the spec's error object (2.8).

Typed ``CoreError`` subclasses carry their own status and body; framework exceptions (unknown
path, wrong method) are mapped here (request bodies are validated by the routes themselves,
with ``backend.protocol.validation``, so FastAPI never validates one); anything else is a 500 whose
body says nothing about internals and names the request id under which it was logged.
Middleware, exception handlers and the SSE stream all call ``to_core_error``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.protocol.errors import (
    APIStatusError,
    AuthenticationError,
    CoreError,
    InternalServerError,
    NotFoundError,
    RetryAfterError,
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


def to_core_error(exc: BaseException, scope: Mapping[str, Any]) -> CoreError:
    """The typed error for any exception raised while serving ``scope``; logs the unexpected."""
    if isinstance(exc, CoreError):
        if isinstance(exc, InternalServerError):
            logger.error("request %s failed: %s", request_id_of(scope), exc.message)
        return exc
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
    if isinstance(error, RetryAfterError) and error.retry_after is not None:
        headers["Retry-After"] = str(max(0, math.ceil(error.retry_after)))
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
    app.add_exception_handler(StarletteHTTPException, _handle)
