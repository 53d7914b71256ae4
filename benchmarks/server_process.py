"""The API server in a child process, as users run it: ``core-textmodels serve`` on loopback."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from backend.http_client import HTTPBackend


@dataclass
class ServerProcess:
    base_url: str
    api_key: str
    process: subprocess.Popen

    def client(self, **options) -> HTTPBackend:
        return HTTPBackend(self.base_url, api_key=self.api_key, max_retries=0, **options)

    def peak_rss_mib(self) -> float:
        """The server's peak resident memory so far (VmHWM), in MiB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
        return kib / 1024


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running_server(profile: str, **settings: str) -> Iterator[ServerProcess]:
    """Start the server (``CORE_SERVER_*`` settings given as keyword arguments), wait until its
    models are loaded, stop it afterwards."""
    port, key = _free_port(), secrets.token_urlsafe(16)
    env = {**os.environ, "CORE_API_KEYS": key, "CORE_MODEL_PROFILE": profile}
    env.update({f"CORE_SERVER_{name.upper()}": str(value) for name, value in settings.items()})
    command = [sys.executable, "-m", "backend.cli", "serve", "--port", str(port)]
    log = Path(tempfile.gettempdir()) / f"core-bench-server-{port}.log"
    with open(log, "wb") as output:  # the access log would drown the figures
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(base_url, process, log)
        yield ServerProcess(base_url, key, process)
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_until_ready(
    base_url: str, process: subprocess.Popen, log: Path, timeout: float = 900
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}; see {log}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/health", timeout=2).json().get("ready"):
                return
        time.sleep(0.5)
    raise TimeoutError(f"the server at {base_url} was not ready after {timeout:.0f} s")
