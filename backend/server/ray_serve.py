"""Replicas of the server on Ray Serve: the same app as ``create_app`` in each (needs the ``ray``
extra).

    serve run backend.server.ray_serve:app_builder profile=small replicas=2
    core-textmodels serve --ray --replicas 2 --profile small

Each replica builds its own backend from the backend options (``backend.connect(**options)``:
in-process with ``profile=...``, or any other ``connect`` options, such as an engine's) and
serves ``create_app(backend, settings)``: auth, limits, errors and metrics as everywhere, with
``x-served-by`` naming the replica by its Serve id. Readiness is the replica's health check:
Serve sends a replica requests only once its first check passed, which waits for the models,
and replaces a replica whose check fails (loading failed).

Keys and ``CORE_SERVER_*`` settings are read where the application is built (``serve run``'s
process, or the ``core-textmodels`` command) and handed to the replicas; other ``CORE_*``
variables (``CORE_CHAT_THREADS``...) are read by each replica from its node's environment,
which on a cluster started by the command is the command's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from dataclasses import replace
from typing import Any

import ray
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve import Application

from backend import connect
from backend.server.app import create_app
from backend.server.context import ServerContext
from backend.server.runner import serving_settings
from backend.server.settings import ServerSettings

logger = logging.getLogger("backend.server")

APP_NAME = "core-textmodels"
DEPLOYMENT_NAME = "CoreTextModels"
#: CPUs Ray reserves for each replica: little, so two replicas fit on a two-core machine
#: (the engines' own threads, ``CORE_CHAT_THREADS``, decide what they really use).
DEFAULT_NUM_CPUS = 0.5
RAY_ADDRESS_ENV = "RAY_ADDRESS"
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def replica_name() -> str:
    """This replica's Serve id (``SERVE_REPLICA::<app>#<deployment>#<id>``)."""
    return serve.get_replica_context().replica_id.to_full_id_str()


@serve.deployment(name=DEPLOYMENT_NAME, ray_actor_options={"num_cpus": DEFAULT_NUM_CPUS})
@serve.ingress()
class ServerReplica:
    """One replica: its own backend behind the app ``create_app`` builds.

    Args:
        backend_options: ``backend.connect`` keywords (``profile``, an engine's options...).
        settings: the server settings; ``served_by`` is replaced by this replica's id.
    """

    def __init__(self, backend_options: dict[str, Any], settings: ServerSettings) -> None:
        self._backend = connect(**backend_options)
        self._settings = replace(settings, served_by=replica_name())
        self._context: ServerContext | None = None

    def __serve_build_asgi_app__(self) -> FastAPI:
        """The app, built in the replica after ``__init__`` (Serve runs its lifespan)."""
        app = create_app(self._backend, self._settings)
        self._context = app.state.core
        return app

    async def check_health(self) -> None:
        """Serve's health check: readiness, by the lifecycle's rule.

        The first check is part of starting the replica, so it waits for the models: Serve
        routes requests to the replica only after it passes.

        Raises:
            ServiceUnavailableError: loading failed, or the replica is draining.
        """
        assert self._context is not None, "Serve builds the app before checking health"
        lifecycle = self._context.lifecycle
        await asyncio.to_thread(lifecycle.wait_settled)
        lifecycle.check_accepting()

    def __del__(self) -> None:
        # Serve calls this at shutdown, after the app's lifespan has drained it; a constructor
        # that failed (a wrong backend option) left no backend to close.
        backend = getattr(self, "_backend", None)
        if backend is not None:
            backend.close()


class ServeOptions(BaseModel):
    """``app_builder``'s arguments (``serve run ... key=value``): how many replicas, their CPUs
    and keys; every other argument is a ``backend.connect`` option for each replica."""

    model_config = ConfigDict(extra="allow")

    replicas: int = Field(default=1, ge=1, description="Replicas of the app.")
    num_cpus: float = Field(
        default=DEFAULT_NUM_CPUS, gt=0, description="CPUs Ray reserves for each replica."
    )
    api_key_file: str | None = Field(
        default=None, description="File of accepted keys, besides CORE_API_KEYS."
    )
    no_auth: bool = Field(default=False, description="Serve without authentication.")
    # Typed here because ``serve run`` hands every argument over as a string.
    grounded_at: float | None = Field(default=None, description="connect's grounded_at.")
    not_grounded_below: float | None = Field(
        default=None, description="connect's not_grounded_below."
    )

    def backend_options(self) -> dict[str, Any]:
        """The ``backend.connect`` keywords: every other argument given."""
        typed = {"grounded_at": self.grounded_at, "not_grounded_below": self.not_grounded_below}
        options = {**(self.model_extra or {}), **typed}
        return {name: value for name, value in options.items() if value is not None}


def build_app(
    backend_options: dict[str, Any],
    settings: ServerSettings,
    *,
    replicas: int = 1,
    num_cpus: float = DEFAULT_NUM_CPUS,
) -> Application:
    """The Serve application: ``replicas`` replicas, each serving ``backend_options``'
    backend with ``settings``."""
    deployment = ServerReplica.options(
        num_replicas=replicas,
        ray_actor_options={"num_cpus": num_cpus},
        # The app's own limiter answers 429 with Retry-After past its places and queue;
        # Serve's cap only keeps a replica from being sent more than the app would take.
        max_ongoing_requests=settings.max_concurrent + settings.max_queued,
        # A drain must be able to finish before Serve stops the replica.
        graceful_shutdown_timeout_s=settings.shutdown_drain_timeout + 1,
    )
    return deployment.bind(backend_options, settings)


def app_builder(args: dict[str, Any]) -> Application:
    """For ``serve run backend.server.ray_serve:app_builder profile=small replicas=2``:
    ``ServeOptions`` from the arguments, keys from ``CORE_API_KEYS`` and ``api_key_file``.

    Raises:
        ValueError: no API keys and not ``no_auth``.
    """
    options = ServeOptions.model_validate(args)
    settings = serving_settings(options.api_key_file, options.no_auth)
    return build_app(
        options.backend_options(), settings, replicas=options.replicas, num_cpus=options.num_cpus
    )


def run_replicas(
    backend_options: dict[str, Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    replicas: int = 1,
    num_cpus: float = DEFAULT_NUM_CPUS,
    key_file: str | None = None,
    no_auth: bool = False,
) -> None:
    """Serve ``replicas`` replicas on Ray Serve at ``host:port`` until SIGINT or SIGTERM
    (``core-textmodels serve --ray``).

    Joins the cluster at ``RAY_ADDRESS`` when it is set (and not ``local``), else starts a
    Ray of its own on this machine. At the end, a Ray of its own is shut down with Serve;
    on a joined cluster only this application is deleted, leaving Serve to the cluster.

    Raises:
        ValueError: no API keys and not ``no_auth``.
        FileNotFoundError: ``key_file`` does not exist.
    """
    settings = serving_settings(key_file, no_auth)
    app = build_app(backend_options, settings, replicas=replicas, num_cpus=num_cpus)
    address = os.environ.get(RAY_ADDRESS_ENV) or "local"
    joined = address != "local"
    ray.init(address=address, include_dashboard=None if joined else False)
    stop = threading.Event()
    # Installed after ray.init, whose own SIGTERM handler would exit without stopping Serve.
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(app, name=APP_NAME, route_prefix="/")  # returns once the replicas are ready
        logger.warning("serving %d replicas at http://%s:%d", replicas, host, port)
        stop.wait()
        logger.warning("stopping the replicas")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            if joined:
                serve.delete(APP_NAME)
            else:
                serve.shutdown()
        finally:
            ray.shutdown()
