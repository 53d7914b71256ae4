"""One in-process backend per engine settings, shared by the adapters of a process.

The LangChain and LlamaIndex components built with the same settings use the same models
instead of loading them again. Each holds its own handle: closing a handle gives up that
reference only, and closing the last one frees the models. A handle dropped unclosed gives up
its reference too, but leaves the models loaded for the next adapter: building adapters where
they are used (``ChatCore().invoke(...)`` in a function) must not reload the models each time.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from backend.backends.local.backend import InProcessBackend
from backend.backends.local.config import EngineConfig
from backend.interface import BackendProxy


class SharedBackend(BackendProxy):
    """A reference to the shared in-process backend of some engine settings (``inner``)."""

    def __init__(self, inner: InProcessBackend, owner: SharedBackends, config: EngineConfig):
        super().__init__(inner)
        self._owner, self._config = owner, config
        # A handle collected unclosed gives up its reference then, on a thread of its own:
        # the collector may run while this thread holds the owner's lock.
        self._collected = weakref.finalize(self, owner.release_soon, config)
        self._collected.atexit = False

    def close(self) -> None:
        """Give up this reference; the models are freed with the last one."""
        if self._collected.detach() is not None:  # only the first close counts
            self._owner.release(self._config)


class SharedBackends:
    """The shared backends of a process, counted by the handles that use them.

    Args:
        build: makes the backend for a configuration (tests pass one on offline engines).
    """

    def __init__(
        self, build: Callable[[EngineConfig], InProcessBackend] = InProcessBackend
    ) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._entries: dict[EngineConfig, tuple[InProcessBackend, int]] = {}

    def acquire(self, config: EngineConfig) -> SharedBackend:
        """A new handle on the backend for ``config`` (created, models not yet loaded, when
        there is none)."""
        with self._lock:
            inner, count = self._entries.get(config) or (self._build(config), 0)
            self._entries[config] = (inner, count + 1)
        return SharedBackend(inner, self, config)

    def release_soon(self, config: EngineConfig) -> None:
        """Give up the reference of a handle dropped unclosed: the models stay loaded."""
        threading.Thread(target=self.release, args=(config, False), daemon=True).start()

    def release(self, config: EngineConfig, free_last: bool = True) -> None:
        """Give up one reference to the backend for ``config``; with the last, close it
        (``free_last``) or keep it loaded for the next handle."""
        with self._lock:
            inner, count = self._entries[config]
            if count > 1 or not free_last:
                self._entries[config] = (inner, count - 1)
                return
            del self._entries[config]
        inner.close()

    def holders(self, config: EngineConfig) -> int:
        """How many handles use the backend for ``config`` now."""
        with self._lock:
            return self._entries.get(config, (None, 0))[1]


_SHARED = SharedBackends()


def shared_backend(config: EngineConfig | None = None) -> SharedBackend:
    """A handle on the one in-process backend for these engine settings (default: from the
    environment) in this process."""
    return _SHARED.acquire(config or EngineConfig.from_env())
