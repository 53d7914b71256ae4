"""The real ``core-textmodels serve`` path (``run_server``) on the echo fakes, in its own process.

Load and shutdown tests need the server in a process of its own: to send it SIGTERM, and to
measure its memory apart from the clients'. ``python -m tests.reliability.server_process PORT
TOKEN_DELAY`` serves; ``ServerProcess`` starts one, waits until it is ready and kills it after.
Limits are set as an operator would, through ``CORE_SERVER_*`` variables.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx
import psutil

from tests.server.helpers import API_KEY, LOOPBACK

ROOT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """``with ServerProcess(token_delay, CORE_SERVER_MAX_QUEUED="8") as server: server.url``."""

    def __init__(self, token_delay: float = 0.0, log: Path | None = None, **env: str) -> None:
        self.token_delay = token_delay
        self.env = env
        self.log_path = log
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> ServerProcess:
        with socket.socket() as probe:
            probe.bind((LOOPBACK, 0))
            port = probe.getsockname()[1]
        self.url = f"http://{LOOPBACK}:{port}"
        env = {
            **os.environ,
            "CORE_API_KEYS": API_KEY,
            "PYTHONPATH": str(ROOT),
            "OMP_NUM_THREADS": "1",
            **self.env,
        }
        if self.log_path is not None:
            self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.reliability.server_process",
                str(port),
                str(self.token_delay),
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, "server died"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).json()["ready"]:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError("the server did not become ready")

    @property
    def rss(self) -> int:
        """The server's resident memory now, in bytes."""
        assert self.process is not None
        return psutil.Process(self.process.pid).memory_info().rss

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self._log is not None:
            self._log.close()


def _serve(port: int, token_delay: float) -> None:
    import backend.engines.loader as loader
    from backend.server.runner import run_server
    from tests.fakes import CharCountEmbeddingEngine, EchoChatEngine

    loader.load_chat_engine = lambda config: EchoChatEngine(token_delay=token_delay)
    loader.load_embedding_engine = lambda config: CharCountEmbeddingEngine()
    run_server(host=LOOPBACK, port=port)


if __name__ == "__main__":
    _serve(int(sys.argv[1]), float(sys.argv[2]))
