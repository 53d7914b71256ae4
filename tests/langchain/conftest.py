"""Fixtures for the LangChain adapter tests: offline scripted backends that record what they
are asked, and the service's real server on a loopback port (in front of the scripted
backend, or of the shared small-profile backend)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import uvicorn

from backend.inprocess import InProcessBackend
from backend.interface import Backend
from tests.langchain.lc_doubles import TEST_API_KEY, RecordingBackend, scripted_inprocess


@pytest.fixture
def scripted() -> Callable[[str], RecordingBackend]:
    """Factory: a recording backend whose chat model always answers with the given text."""

    def make(reply: str = "Hello there.") -> RecordingBackend:
        return RecordingBackend(scripted_inprocess(reply))

    return make


# ---------------------------------------------------------------- a real server (HTTP tests)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ready(base_url: str) -> bool:
    try:
        return bool(httpx.get(f"{base_url}/health", timeout=2).json().get("ready"))
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def serving(service: Backend) -> Iterator[str]:
    """Run the service's server for ``service`` on a free loopback port; yield its URL."""
    from backend.server.app import create_app
    from backend.server.settings import ServerSettings

    app = create_app(service, ServerSettings(api_keys=(TEST_API_KEY,)))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="lc-test-server", daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not (server.started and _ready(base_url)):
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield base_url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="session")
def http_base_url(small_backend: InProcessBackend) -> Iterator[str]:
    """A server on 127.0.0.1 in front of the shared small-profile backend."""
    with serving(small_backend) as base_url:
        yield base_url


@pytest.fixture
def core_env_for_http(monkeypatch: pytest.MonkeyPatch, http_base_url: str) -> str:
    """Point adapters built without arguments at the small-profile server."""
    monkeypatch.setenv("CORE_BASE_URL", http_base_url)
    monkeypatch.setenv("CORE_API_KEY", TEST_API_KEY)
    return http_base_url


@pytest.fixture(scope="module")
def scripted_server() -> Iterator[tuple[str, RecordingBackend]]:
    """A server in front of a recording scripted backend; set ``.inner`` to change replies."""
    service = RecordingBackend(scripted_inprocess())
    with serving(service) as base_url:
        yield base_url, service
