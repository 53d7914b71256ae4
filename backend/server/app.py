"""The FastAPI app factory: the service's HTTP API over any ``Backend``.

>>> from backend.backends.local import InProcessBackend
>>> from backend.server import ServerSettings, create_app
>>> app = create_app(InProcessBackend(profile="small"), ServerSettings(api_keys=("k",)))

The app loads the models in the background at startup (``/ready`` answers 200 once they are
loaded, 503 before and while draining; ``/health`` is liveness), serves
``/v1/core/chat/completions``, ``/v1/core/embeddings`` and ``/v1/core/models`` behind bearer
keys, and ``/health``, ``/ready``, ``/metrics`` and ``/openapi.json`` without. Every response
names the replica that served it in ``x-served-by``. The caller owns the backend and closes it
after the app has shut down.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.types import Scope

from backend.interface import Backend
from backend.protocol.groundedness_report import GroundednessReportRequest
from backend.protocol.schemas import ChatCompletionChunk, ChatCompletionRequest, EmbeddingRequest
from backend.protocol.tokenize import TokenizeRequest
from backend.server.auth import BearerAuth
from backend.server.context import ServerContext
from backend.server.errors import install_exception_handlers, logger
from backend.server.middleware import AuthMiddleware, BodyLimitMiddleware, RequestContextMiddleware
from backend.server.routes import router
from backend.server.settings import ServerSettings

TITLE = "core-textmodels"
VERSION = "0.1.0"
_DRAIN_POLL_SECONDS = 0.05


def _lifespan(context: ServerContext):  # noqa: ANN202 - FastAPI's lifespan protocol
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        context.lifecycle.start_loading()
        yield
        context.lifecycle.begin_drain()
        await drain(context)

    return lifespan


async def drain(context: ServerContext) -> bool:
    """Wait until no model request is running or queued, at most the drain timeout.

    The timeout counts from when draining began (a signal may have started it earlier), so
    a drain the runner already waited out is not waited for a second time.
    """
    began = context.lifecycle.drain_began or time.monotonic()
    deadline = began + context.settings.shutdown_drain_timeout
    while context.limiter.active or context.limiter.queued:
        if time.monotonic() >= deadline:
            logger.warning("drain timeout: %d model requests still running", context.limiter.active)
            return False
        await asyncio.sleep(_DRAIN_POLL_SECONDS)
    return True


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the request and chunk schemas the routes reference by name."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    documented = (
        ChatCompletionRequest,
        EmbeddingRequest,
        TokenizeRequest,
        GroundednessReportRequest,
        ChatCompletionChunk,
    )
    for model in documented:
        model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in model_schema.pop("$defs", {}).items():
            components.setdefault(name, definition)
        components[model.__name__] = model_schema
    app.openapi_schema = schema
    return schema


def create_app(backend: Backend, settings: ServerSettings | None = None) -> FastAPI:
    """Build the app serving ``backend``.

    Args:
        backend: what answers the requests (usually ``InProcessBackend``); its ``warmup()``
            runs in a background thread at startup.
        settings: limits and keys (default: ``ServerSettings.from_env()``).

    Raises:
        ValueError: no API keys and ``settings.no_auth`` not set.
    """
    settings = settings or ServerSettings.from_env()
    if not settings.api_keys and not settings.no_auth:
        raise ValueError(
            "no API keys configured: set CORE_API_KEYS or give a key file, or serve without "
            "authentication explicitly (no_auth / --no-auth)"
        )
    context = ServerContext.create(backend, settings)
    app = FastAPI(
        title=TITLE,
        version=VERSION,
        description="Chat completions (tools, streaming), groundedness checks and "
        "query/passage embeddings.",
        lifespan=_lifespan(context),
        redirect_slashes=False,
    )
    app.state.core = context
    app.include_router(router)
    install_exception_handlers(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]

    known = {getattr(route, "path", None) for route in (*app.routes, *router.routes)}

    def route_label(scope: Scope) -> str:
        route = scope.get("route")
        path = getattr(route, "path", None) or scope.get("path", "")
        return path if path in known else "unmatched"

    # Added innermost first: the request context wraps everything, auth runs before the body.
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    auth = None if settings.no_auth else BearerAuth(settings.api_keys)
    app.add_middleware(AuthMiddleware, auth=auth)
    app.add_middleware(
        RequestContextMiddleware,
        metrics=context.metrics,
        route_label=route_label,
        served_by=settings.served_by,
    )
    return app
