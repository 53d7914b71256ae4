"""Fixtures for the LangChain adapter tests: offline scripted backends that record what they
are asked, and the service's real server on a loopback port (in front of the scripted
backend, or of the shared small-profile backend)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from backend.testing import RecordingBackend, scripted_backend
from backend.testing.servers import TEST_API_KEY, RunningServer, running_server


@pytest.fixture
def scripted() -> Callable[[str], RecordingBackend]:
    """Factory: a recording backend whose chat model always answers with the given text."""

    def make(reply: str = "Hello there.") -> RecordingBackend:
        return RecordingBackend(scripted_backend(reply))

    return make


@pytest.fixture
def core_env_for_http(monkeypatch: pytest.MonkeyPatch, real_server: RunningServer) -> str:
    """Point adapters built without arguments at the small-profile server."""
    monkeypatch.setenv("CORE_BASE_URL", real_server.url)
    monkeypatch.setenv("CORE_API_KEY", TEST_API_KEY)
    return real_server.url


@pytest.fixture(scope="module")
def scripted_server() -> Iterator[tuple[str, RecordingBackend]]:
    """A server in front of a recording scripted backend; set ``.inner`` to change replies."""
    service = RecordingBackend(scripted_backend())
    with running_server(service) as running:
        yield running.url, service
