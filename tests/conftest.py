"""Shared fixtures: environment isolation, the real small-profile backend, and servers on
loopback (``backend.testing.servers``) for every suite."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import pytest

from backend.server.settings import ENV_PREFIX
from backend.testing.servers import RunningServer, running_server

# Variables that change what a backend connects to or loads; tests set what they need.
_ISOLATED = (
    "CORE_BASE_URL",
    "CORE_API_KEY",
    "CORE_API_KEYS",
    "CORE_CHAT_MODEL",
    "CORE_EMBEDDING_MODEL",
    "CORE_DEVICE",
    "CORE_CHAT_ENGINE",
    "CORE_GROUNDEDNESS_ENGINE",
    "CORE_JUDGE_MODEL",
    "CORE_CHAT_THREADS",
    "CORE_CHAT_PARALLEL",
    "CORE_CHAT_DTYPE",
    "CORE_EMBEDDING_DTYPE",
    "CORE_QUERY_PREFIX",
    "CORE_PASSAGE_PREFIX",
    "CORE_ENGINE_URL",
    "CORE_ENGINE_CHAT_MODEL",
    "CORE_ENGINE_EMBEDDINGS_URL",
    "CORE_ENGINE_EMBEDDING_MODEL",
    "CORE_ENGINE_EMBEDDING_TOKENIZER",
    "CORE_ENGINE_API_KEY",
)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ISOLATED:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):  # server settings: each test gives its own
            monkeypatch.delenv(name)
    monkeypatch.setenv("CORE_MODEL_PROFILE", "small")


@pytest.fixture(scope="session")
def small_backend():
    """The in-process backend on the small profile, loaded once for the whole run."""
    from backend.backends.local import InProcessBackend

    service = InProcessBackend(profile="small", device=os.environ.get("CORE_TEST_DEVICE"))
    service.warmup()
    yield service
    service.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RunningServer]]:
    """Start servers in threads that stop after the test: ``serve(backend=None, **settings)``
    (default: the scripted offline backend; settings are ``ServerSettings`` fields)."""
    with contextlib.ExitStack() as stack:

        def start(backend=None, **settings) -> RunningServer:
            return stack.enter_context(running_server(backend, **settings))

        yield start


@pytest.fixture(scope="session")
def real_server(small_backend) -> Iterator[RunningServer]:
    """A server over the session's real small-profile backend."""
    with running_server(small_backend) as running:
        yield running
