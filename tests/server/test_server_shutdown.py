"""``run_server`` in a real process on fake engines: SIGTERM drains in-flight streams, refuses
new model requests with 503, then exits cleanly."""

from __future__ import annotations

import signal
import sys

import httpx
import pytest

from backend.testing.servers import ServerProcess
from tests.waiting import wait_for

REQUEST = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_drains_then_exits(tmp_path):
    with ServerProcess(fake="Hello world", token_delay=0.15, log=tmp_path / "server.log") as server:
        with server.client() as client:
            stream = client.stream_chat(REQUEST)
            next(stream)
            server.process.send_signal(signal.SIGTERM)
            ready = f"{server.url}/ready"
            wait_for(lambda: httpx.get(ready).status_code == 503, "the signal's landing")
            refused = httpx.post(
                f"{server.url}/v1/core/chat/completions",
                json=REQUEST,
                headers={"Authorization": f"Bearer {server.api_key}"},
            )
            assert refused.status_code == 503
            content = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            assert content == "Hello world"  # the in-flight stream finished
        assert server.process.wait(15) == 0
