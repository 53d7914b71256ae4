"""Fixtures of the server suite: servers on loopback ports, the fake and the real backends."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator

import pytest

from backend.inprocess import InProcessBackend
from backend.interface import Backend
from backend.server.settings import ENV_PREFIX
from tests.server.helpers import RunningServer, start_server


@pytest.fixture(autouse=True)
def _no_server_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)


@pytest.fixture
def serve() -> Iterator[Callable[..., RunningServer]]:
    """Start servers that stop after the test: ``serve(backend=None, **settings)``."""
    with contextlib.ExitStack() as stack:
        yield functools.partial(start_server, stack)


@pytest.fixture(scope="module")
def fake_server() -> Iterator[RunningServer]:
    """One server on fake engines for a whole module (tests that do not change its state)."""
    with contextlib.ExitStack() as stack:
        yield start_server(stack)


@pytest.fixture(scope="session")
def real_server(small_backend: InProcessBackend) -> Iterator[RunningServer]:
    """A server over the session's real small-profile backend."""
    with contextlib.ExitStack() as stack:
        yield start_server(stack, small_backend)


@pytest.fixture(scope="session", params=["inprocess", "http"])
def service(request: pytest.FixtureRequest, small_backend: InProcessBackend) -> Iterator[Backend]:
    """The contract suite's subject: the real backend in-process, or behind the real server."""
    if request.param == "inprocess":
        yield small_backend
        return
    running: RunningServer = request.getfixturevalue("real_server")
    client = running.client(max_retries=0, timeout=300)
    yield client
    client.close()
