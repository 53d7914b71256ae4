"""Fixtures of the server suite: a server on the offline doubles, and the contract suite's
subject (the real backend in-process, or behind the real server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from backend.backends.local import InProcessBackend
from backend.interface import Backend
from backend.testing.servers import RunningServer, running_server


@pytest.fixture(scope="module")
def fake_server() -> Iterator[RunningServer]:
    """One server on fake engines for a whole module (tests that do not change its state)."""
    with running_server() as running:
        yield running


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
