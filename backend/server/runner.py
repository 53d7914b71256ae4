"""Serving the app with uvicorn: ``core-textmodels serve`` calls ``run_server``.

On SIGTERM or SIGINT the server first drains: model requests in flight finish (at most
``shutdown_drain_timeout`` seconds) while new ones get 503; then uvicorn shuts down, giving
open connections one more second. A second signal stops at once. Model work still running
after the drain timeout does not hold the process: it exits with status 1.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from types import FrameType

import uvicorn

from backend.interface import Backend
from backend.server.app import create_app
from backend.server.auth import load_api_keys
from backend.server.context import ServerContext
from backend.server.settings import ServerSettings

logger = logging.getLogger("backend.server")


#: Seconds uvicorn gives open connections to finish once the drain is over.
_CLOSE_GRACE_SECONDS = 1.0


class DrainingServer(uvicorn.Server):
    """``uvicorn.Server`` that drains model requests before it stops accepting connections.

    Args:
        exit_when_abandoned: when model work is still running after the drain timeout, end
            the process (exit status 1) instead of returning. Model work runs in threads that
            cannot be interrupted, and leaving ``run()`` normally waits for them (asyncio
            joins its executor), which would hold the process past the drain timeout, up to
            the end of a long generation. For the process that owns the server only.
    """

    def __init__(
        self, config: uvicorn.Config, context: ServerContext, exit_when_abandoned: bool = False
    ) -> None:
        super().__init__(config)
        self.context = context
        self.exit_when_abandoned = exit_when_abandoned
        self._drain_deadline: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain_deadline is not None or self.should_exit:
            super().handle_exit(sig, frame)  # a second signal: stop now
            return
        self.context.lifecycle.begin_drain()
        self._drain_deadline = time.monotonic() + self.context.settings.shutdown_drain_timeout

    async def on_tick(self, counter: int) -> bool:
        if self._drain_deadline is not None and not self.should_exit:
            limiter = self.context.limiter
            idle = not limiter.active and not limiter.queued
            if idle or time.monotonic() >= self._drain_deadline:
                # The drain is over: uvicorn's own graceful wait must not add a second one.
                self.config.timeout_graceful_shutdown = _CLOSE_GRACE_SECONDS
                self.should_exit = True
        return await super().on_tick(counter)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await super().serve(sockets)
        running = self.context.limiter.active
        if running and self.exit_when_abandoned:
            logger.error(
                "stopping with %d model requests still running after the drain timeout", running
            )
            logging.shutdown()
            os._exit(1)


def build_server(
    backend: Backend,
    settings: ServerSettings,
    host: str = "127.0.0.1",
    port: int = 8000,
    exit_when_abandoned: bool = False,
    **uvicorn_options: object,
) -> DrainingServer:
    """The uvicorn server for ``backend``, not yet started (``.run()`` or ``.serve()``).

    ``exit_when_abandoned``: see ``DrainingServer``.
    """
    app = create_app(backend, settings)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        timeout_graceful_shutdown=max(1, round(settings.shutdown_drain_timeout)),
        **uvicorn_options,  # type: ignore[arg-type]
    )
    return DrainingServer(config, app.state.core, exit_when_abandoned=exit_when_abandoned)


def serving_settings(key_file: str | None = None, no_auth: bool = False) -> ServerSettings:
    """The settings a served app starts with: keys from ``CORE_API_KEYS`` and ``key_file``,
    the rest from ``CORE_SERVER_*`` variables. Checked here, before anything is started, for
    every way of serving (uvicorn here, replicas on Ray Serve).

    Raises:
        ValueError: no API keys and not ``no_auth``.
        FileNotFoundError: ``key_file`` does not exist.
    """
    keys = load_api_keys(key_file)
    if no_auth:
        logger.warning("serving WITHOUT authentication: anyone who can connect can use it")
    elif not keys:
        raise ValueError(
            "no API keys configured: set CORE_API_KEYS, pass --api-key-file, or pass --no-auth "
            "to serve without authentication"
        )
    return ServerSettings.from_env(api_keys=keys, no_auth=no_auth)


def run_server(
    host: str = "127.0.0.1",
    port: int = 8000,
    no_auth: bool = False,
    key_file: str | None = None,
    profile: str | None = None,
    chat_engine: str | None = None,
    backend: Backend | None = None,
    judge_model: str | None = None,
) -> None:
    """Serve ``backend`` (default: the in-process backend of ``profile``, ``chat_engine`` and
    ``judge_model``) until interrupted.

    Settings come from ``serving_settings(key_file, no_auth)``. The backend is closed when
    the server stops.

    Raises:
        ValueError: no API keys and not ``no_auth``.
        FileNotFoundError: ``key_file`` does not exist.
    """
    settings = serving_settings(key_file, no_auth)
    if backend is None:
        from backend.backends.local import InProcessBackend

        backend = InProcessBackend(
            profile=profile, chat_engine=chat_engine, judge_model=judge_model
        )
    try:
        build_server(backend, settings, host=host, port=port, exit_when_abandoned=True).run()
    finally:
        backend.close()
