"""Servers of this API for tests and benchmarks, on loopback: in a thread of this process, or
in a child process as users run it (``core-textmodels serve``, or the server on the offline
doubles: ``python -m backend.testing.servers --port 8123 --echo``). Needs the ``server`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from backend.backends.client import HTTPBackend
from backend.interface import Backend

LOOPBACK = "127.0.0.1"
#: The key the test servers accept unless told otherwise.
TEST_API_KEY = "test-key-0123456789"


def free_port() -> int:
    """A loopback port free now (another process may take it before it is used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


# ---------------------------------------------------------------- in a thread of this process


@contextlib.contextmanager
def serve_in_thread(server: Any, timeout: float = 30.0) -> Iterator[str]:
    """Run a ``uvicorn.Server`` on a free loopback port in a thread; yield its base URL; stop
    it afterwards."""
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
    """A server running in a thread: its URL, the uvicorn server and the app's shared state."""

    url: str
    server: Any  # backend.server.runner.DrainingServer
    api_key: str

    @property
    def context(self) -> Any:  # backend.server.context.ServerContext
        return self.server.context

    def client(self, **options: Any) -> HTTPBackend:
        return HTTPBackend(self.url, api_key=self.api_key, **options)


@contextlib.contextmanager
def running_server(
    backend: Backend | None = None, *, wait_loaded: bool = True, **settings: Any
) -> Iterator[RunningServer]:
    """Serve ``backend`` (default: the scripted offline backend) in a thread until the block
    ends. ``settings`` are ``ServerSettings`` fields; the key is ``TEST_API_KEY`` unless
    ``api_keys`` says otherwise. With ``wait_loaded`` the models are loaded first."""
    from backend.server.runner import build_server
    from backend.server.settings import ServerSettings
    from backend.testing.backends import scripted_backend

    settings.setdefault("api_keys", (TEST_API_KEY,))
    server = build_server(
        backend or scripted_backend(),
        ServerSettings(**settings),
        host=LOOPBACK,
        port=0,
        log_level="warning",
    )
    with serve_in_thread(server) as url:
        running = RunningServer(url, server, (settings["api_keys"] or ("",))[0])
        if wait_loaded:
            running.context.lifecycle.wait_loaded(600)
        yield running


# ---------------------------------------------------------------- in a child process


class ServerProcess:
    """A server in a child process on a free loopback port: started, waited for until its
    models are loaded, stopped at the end of the ``with`` block.

    ``with ServerProcess(profile="small") as server: server.client().chat(...)``

    Args:
        profile: the server's ``CORE_MODEL_PROFILE`` (None: the environment's).
        fake: serve the offline doubles instead of models: ``"echo"`` answers each request
            with its last user message, any other text is the answer to every request.
        token_delay: with ``fake``, seconds before each token.
        settings: ``CORE_SERVER_*`` settings by field name (``max_queued=8``).
        env: more environment variables for the server.
        log: where the server's output goes (default: discarded).
        ready_timeout: seconds to wait for the models.
    """

    def __init__(
        self,
        profile: str | None = None,
        *,
        fake: str | None = None,
        token_delay: float = 0.0,
        settings: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        ready_timeout: float = 900.0,
    ) -> None:
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.api_key = TEST_API_KEY
        self.log_path = log
        self.ready_timeout = ready_timeout
        self._env = {**os.environ, "CORE_API_KEYS": self.api_key, **(env or {})}
        if profile is not None:
            self._env["CORE_MODEL_PROFILE"] = profile
        for name, value in (settings or {}).items():
            self._env[f"CORE_SERVER_{name.upper()}"] = str(value)
        port = ["--port", str(self.port)]
        if fake is None:
            self.command = [sys.executable, "-m", "backend.cli", "serve", *port]
        else:
            served = ["--echo"] if fake == "echo" else ["--reply", fake]
            served += ["--token-delay", str(token_delay)]
            self.command = [sys.executable, "-m", "backend.testing.servers", *port, *served]
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> ServerProcess:
        if self.log_path is not None:
            self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.command,
            env=self._env,
            stdout=self._log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        try:
            self.wait_ready(self.ready_timeout)
        except BaseException:
            self.__exit__()
            raise
        return self

    def wait_ready(self, timeout: float) -> None:
        """Wait until the server reports its models loaded.

        Raises:
            RuntimeError: the server exited.
            TimeoutError: it was not ready within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                where = f"; see {self.log_path}" if self.log_path else ""
                raise RuntimeError(f"the server exited with {self.process.returncode}{where}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                if httpx.get(f"{self.url}/health", timeout=2).json().get("ready"):
                    return
            time.sleep(0.1)
        raise TimeoutError(f"the server at {self.url} was not ready after {timeout:.0f} s")

    def client(self, **options: Any) -> HTTPBackend:
        """An HTTP client with the server's key (no retries unless asked)."""
        options.setdefault("max_retries", 0)
        return HTTPBackend(self.url, api_key=self.api_key, **options)

    @property
    def rss(self) -> int:
        """The server's resident memory now, in bytes."""
        import psutil

        assert self.process is not None
        return psutil.Process(self.process.pid).memory_info().rss

    def peak_rss_mib(self) -> float:
        """The server's peak resident memory so far (Linux's VmHWM), in MiB."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
        return kib / 1024

    def stop(self, timeout: float = 60.0) -> int:
        """Ask the server to stop (SIGTERM: it drains first); kill it after ``timeout``.
        Returns its exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self._log is not None:
            self._log.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the offline doubles (keys from ``CORE_API_KEYS``), for tests that need a server
    process of their own: to signal it, or to measure its memory apart from the clients'."""
    from backend.server.runner import run_server
    from backend.testing.backends import offline_backend
    from backend.testing.engines import EchoChatEngine, ScriptedChatEngine

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, required=True)
    served = parser.add_mutually_exclusive_group(required=True)
    served.add_argument("--echo", action="store_true", help="answer with the last user message")
    served.add_argument("--reply", help="the answer to every request")
    parser.add_argument("--token-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.echo:
        engine: ScriptedChatEngine = EchoChatEngine(token_delay=args.token_delay)
    else:
        engine = ScriptedChatEngine(args.reply, token_delay=args.token_delay)
    run_server(host=LOOPBACK, port=args.port, backend=offline_backend(engine))


if __name__ == "__main__":
    main()
