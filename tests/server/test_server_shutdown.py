"""``run_server`` in a real process on fake engines: SIGTERM drains in-flight streams, refuses
new model requests with 503, then exits cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from backend.http_client import HTTPBackend
from tests.server.helpers import API_KEY, LOOPBACK

ROOT = Path(__file__).resolve().parents[2]
SERVE_ON_FAKES = """
import sys
import backend.engines.loader as loader
from tests.fakes import CharCountEmbeddingEngine
from tests.server.helpers import SlowChatEngine
loader.load_chat_engine = lambda config: SlowChatEngine("Hello world", delay=0.15)
loader.load_embedding_engine = lambda config: CharCountEmbeddingEngine()
from backend.server.runner import run_server
run_server(host="127.0.0.1", port=int(sys.argv[1]))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_drains_then_exits(tmp_path):
    port = _free_port()
    env = {**os.environ, "CORE_API_KEYS": API_KEY, "PYTHONPATH": str(ROOT)}
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE_ON_FAKES, str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://{LOOPBACK}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"{url}/health").json()["ready"]:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not become ready"
            time.sleep(0.1)
        with HTTPBackend(url, api_key=API_KEY, max_retries=0) as client:
            request = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}]}
            stream = client.stream_chat(request)
            next(stream)
            process.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            refused = httpx.post(
                f"{url}/v1/core/chat/completions",
                json=request,
                headers={"Authorization": f"Bearer {API_KEY}"},
            )
            assert refused.status_code == 503
            content = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            assert content == "Hello world"  # the in-flight stream finished
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
