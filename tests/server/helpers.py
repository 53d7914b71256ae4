"""Test helpers for the server suite: a uvicorn server on a loopback port in a thread, and
fake engines that are slow, count their tokens or fail on demand."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn

from backend.engines.base import SamplingParams
from backend.http_client import HTTPBackend
from backend.inprocess import InProcessBackend
from backend.interface import Backend
from backend.server.context import ServerContext
from backend.server.runner import DrainingServer, build_server
from backend.server.settings import ServerSettings
from tests.fakes import CharCountEmbeddingEngine, ScriptedChatEngine

LOOPBACK = "127.0.0.1"
API_KEY = "test-key-0123456789"
OTHER_KEY = "second-key-abcdef"


@contextlib.contextmanager
def serve_in_thread(server: uvicorn.Server, timeout: float = 30.0) -> Iterator[str]:
    """Run ``server`` on a free loopback port in a thread; yield its base URL; stop it."""
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says TCP; with proto 0, Nagle plus delayed ACKs cost 40 ms a request.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, 0))
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{LOOPBACK}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


@dataclass
class RunningServer:
    url: str
    server: DrainingServer

    @property
    def context(self) -> ServerContext:
        return self.server.context

    def client(self, **options: Any) -> HTTPBackend:
        return HTTPBackend(self.url, api_key=API_KEY, **options)


def start_server(
    stack: contextlib.ExitStack,
    backend: Backend | None = None,
    wait_loaded: bool = True,
    **settings: Any,
) -> RunningServer:
    """Serve ``backend`` (default: fake engines) until ``stack`` closes; keys: ``API_KEY``."""
    settings.setdefault("api_keys", (API_KEY,))
    server = build_server(
        backend or fake_backend(),
        ServerSettings(**settings),
        host=LOOPBACK,
        port=0,
        log_level="warning",
    )
    running = RunningServer(stack.enter_context(serve_in_thread(server)), server)
    if wait_loaded:
        running.context.lifecycle.wait_loaded(600)
    return running


class SlowChatEngine(ScriptedChatEngine):
    """A scripted engine that can wait for a gate, sleeps before each token, can fail after
    some tokens, and records how many tokens it produced (``generated``)."""

    def __init__(
        self,
        reply: str = "x" * 400,
        delay: float = 0.0,
        first_delay: float = 0.0,
        fail_after: int | None = None,
        gate: threading.Event | None = None,
    ) -> None:
        super().__init__(reply)
        self.delay = delay
        self.first_delay = first_delay
        self.fail_after = fail_after
        self.gate = gate
        self.started = threading.Event()
        self.finished = threading.Event()

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[int]:
        self.finished.clear()
        self.started.set()
        try:
            if self.gate is not None:
                self.gate.wait(30)
            time.sleep(self.first_delay)
            for i, token in enumerate(super().generate(prompt_ids, params, should_stop)):
                if self.fail_after is not None and i >= self.fail_after:
                    raise RuntimeError("engine exploded (secret internal detail)")
                time.sleep(self.delay)
                yield token
        finally:
            self.finished.set()


def fake_backend(chat_engine: ScriptedChatEngine | None = None) -> InProcessBackend:
    return InProcessBackend(
        profile="small",
        chat_engine=chat_engine or ScriptedChatEngine("Hello there."),
        embedding_engine=CharCountEmbeddingEngine(),
    )
