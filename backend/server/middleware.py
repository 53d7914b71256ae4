"""Pure ASGI middleware, outermost first: request context, authentication, body limit.

* ``RequestContextMiddleware`` gives each request an id (``x-request-id``, echoed in the
  response), names the replica that served it (``x-served-by``) on every response, records
  request metrics, and turns anything that escapes the app into the error object (500
  without internals, logged under the request id).
* ``AuthMiddleware`` checks the bearer key on every ``/v1`` path before any routing or body
  reading (see ``backend.server.auth`` for the path rule).
* ``BodyLimitMiddleware`` answers 413 for a declared ``Content-Length`` over the limit and
  stops reading a body that grows past it.

Pure ASGI rather than ``BaseHTTPMiddleware`` so streamed responses and disconnects pass
through untouched.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.protocol.errors import CoreError, RequestTooLargeError
from backend.server.auth import BearerAuth, requires_key
from backend.server.errors import error_response, logger, to_core_error
from backend.server.metrics import ServerMetrics

REQUEST_ID_HEADER = "x-request-id"
SERVED_BY_HEADER = "x-served-by"
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_METHOD_LABELS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _reject(error: CoreError, scope: Scope, receive: Receive, send: Send) -> None:
    await error_response(error)(scope, receive, send)


class RequestContextMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        metrics: ServerMetrics,
        route_label: Callable[[Scope], str],
        served_by: str,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.route_label = route_label
        self.served_by = served_by.encode("ascii")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = _header(scope, REQUEST_ID_HEADER.encode())
        request_id = sent if sent and _CLIENT_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status, response_started = message["status"], True
                ours = (REQUEST_ID_HEADER.encode(), SERVED_BY_HEADER.encode())
                headers = [h for h in message.get("headers", ()) if h[0].lower() not in ours]
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                headers.append((SERVED_BY_HEADER.encode(), self.served_by))
                message = {**message, "headers": headers}
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if response_started:
                logger.error("request %s failed mid-response", request_id, exc_info=exc)
                raise
            await error_response(to_core_error(exc, scope))(scope, receive, send_with_id)
        finally:
            method = scope.get("method", "")
            method = method if method in _METHOD_LABELS else "other"  # bounded label values
            path = self.route_label(scope)
            self.metrics.requests.labels(method=method, path=path, status=str(status)).inc()
            self.metrics.latency.labels(method=method, path=path).observe(
                time.perf_counter() - started
            )


class AuthMiddleware:
    def __init__(self, app: ASGIApp, auth: BearerAuth | None) -> None:
        self.app = app
        self.auth = auth  # None: authentication is off (explicit no_auth)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.auth is not None and scope["type"] == "http" and requires_key(scope["path"]):
            try:
                self.auth.check(_header(scope, b"authorization"))
            except CoreError as error:
                await _reject(error, scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _too_large(self) -> RequestTooLargeError:
        return RequestTooLargeError(
            f"request body too large: at most {self.max_body_bytes} bytes are accepted"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit():
            if int(declared) > self.max_body_bytes:
                await _reject(self._too_large(), scope, receive, send)
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise self._too_large()
            return message

        await self.app(scope, limited_receive, send)
