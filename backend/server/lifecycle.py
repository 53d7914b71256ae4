"""Whether the server takes model requests: loading, ready, draining.

Models load in a background thread at startup, so ``/health`` answers at once (alive, not yet
ready) and model requests get 503 with ``Retry-After`` until loading ends. On shutdown the
server drains: new model requests get 503 while those in flight finish. ``check_accepting``
is the one readiness rule: model requests, ``/ready`` and Ray Serve's health check all ask it.
"""

from __future__ import annotations

import logging
import threading
import time

from backend.interface import Backend
from backend.protocol.errors import ServiceUnavailableError

logger = logging.getLogger("backend.server")


class Lifecycle:
    """Loading, readiness and draining of one served backend."""

    def __init__(self, backend: Backend, retry_after: float) -> None:
        self._backend = backend
        self._retry_after = retry_after
        self._loaded = threading.Event()
        self._settled = threading.Event()  # loading is over, loaded or failed
        self._draining = threading.Event()
        #: ``time.monotonic()`` when draining began: the drain timeout counts from there.
        self.drain_began: float | None = None
        self._thread: threading.Thread | None = None
        self.load_error: BaseException | None = None

    def start_loading(self) -> None:
        """Load the models in a daemon thread (``Backend.warmup``)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._load, name="core-warmup", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            self._backend.warmup()
        except Exception as exc:  # noqa: BLE001 - reported by /ready and every model request
            self.load_error = exc
            logger.exception("loading the models failed; model requests will get 503")
        else:
            logger.info("models ready in %.1f s", time.perf_counter() - started)
            self._loaded.set()
        finally:
            self._settled.set()  # after _loaded: whoever waited for this sees the outcome

    def wait_loaded(self, timeout: float | None = None) -> bool:
        return self._loaded.wait(timeout)

    def wait_settled(self, timeout: float | None = None) -> bool:
        """Wait until loading is over, whether it succeeded or failed; False on timeout."""
        return self._settled.wait(timeout)

    @property
    def ready(self) -> bool:
        """Whether ``check_accepting`` passes now (``/health`` reports it)."""
        try:
            self.check_accepting()
        except ServiceUnavailableError:
            return False
        return True

    def begin_drain(self) -> None:
        if not self._draining.is_set():
            logger.info("draining: finishing requests in flight, refusing new model requests")
            self.drain_began = time.monotonic()
            self._draining.set()

    def check_accepting(self) -> None:
        """Return if model requests can be served now (the server is ready); else raise.

        Raises:
            ServiceUnavailableError: draining, loading, or loading failed (503, with the
                ``Retry-After`` seconds of the settings).
        """
        if self._draining.is_set():
            raise ServiceUnavailableError(
                "the server is shutting down; retry on another instance or later",
                retry_after=self._retry_after,
            )
        if self.load_error is not None:
            raise ServiceUnavailableError(
                "the models failed to load; see the server log", retry_after=self._retry_after
            )
        if not self._loaded.is_set():
            raise ServiceUnavailableError(
                "the models are still loading; retry shortly", retry_after=self._retry_after
            )
