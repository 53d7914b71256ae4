"""A plain script that uses the in-process models and ends without ``close()`` exits cleanly
on every chat engine: whatever threads and native resources the engines started are stopped
at interpreter exit, so the process ends with status 0. Before, an engine thread still
decoding at exit aborted the process: SIGABRT (134, "terminate called without an active
exception") on transformers, at times SIGSEGV (139) on llama.cpp."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import backend

    service = backend.connect()
    for question in ("What is the capital of France?", "Count to three."):
        reply = service.chat(
            {
                "model": "core-1-mini-chat",
                "messages": [{"role": "user", "content": question}],
                "max_tokens": 8,
                "temperature": 0,
            }
        )
        print(reply.choices[0].message.content)
    # A stream left unread mid-generation: the engine's thread is still decoding at exit.
    stream = service.stream_chat(
        {
            "model": "core-1-mini-chat",
            "messages": [{"role": "user", "content": "Tell a long story."}],
            "max_tokens": 500,
        }
    )
    chunks = iter(stream)
    for _ in range(3):
        next(chunks)
    print("done")
    """
)


@pytest.mark.parametrize("engine", ["llama.cpp", "transformers"])
def test_a_script_that_never_closes_exits_cleanly(engine: str, tmp_path: Path):
    if engine == "llama.cpp":
        pytest.importorskip("llama_cpp")
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "CORE_CHAT_ENGINE": engine, "CORE_MODEL_PROFILE": "small"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert done.stdout.strip().endswith("done")
    assert "terminate called" not in done.stderr
