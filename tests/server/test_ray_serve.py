"""Replicas on Ray Serve, started as a user starts them: ``core-textmodels serve --ray
--replicas 2`` in a child process with its own Ray on this machine. Both replicas answer, each
naming itself in ``x-served-by``; auth, streams and readiness are the app's; embeddings equal
the in-process ones. Stopping it (SIGINT) leaves no Ray process behind."""

from __future__ import annotations

import collections
import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from backend.testing.servers import LOOPBACK, TEST_API_KEY, free_port

pytest.importorskip("ray.serve")

from backend.server.ray_serve import APP_NAME, DEPLOYMENT_NAME, app_builder  # noqa: E402

AUTH = {"Authorization": f"Bearer {TEST_API_KEY}"}
REPLICA_PREFIX = f"SERVE_REPLICA::{APP_NAME}#{DEPLOYMENT_NAME}#"
STARTUP_TIMEOUT = 300.0
STOP_TIMEOUT = 60.0


def _ready_replica(url: str) -> str | None:
    try:
        response = httpx.get(f"{url}/ready", timeout=2)
    except httpx.HTTPError:
        return None  # not listening yet, or the proxy holds requests until a replica is up
    return response.headers["x-served-by"] if response.status_code == 200 else None


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: str, replicas: int) -> None:
    """Wait until ``replicas`` distinct replicas have answered ``/ready`` with 200."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    ready: set[str] = set()
    with ThreadPoolExecutor(4) as pool:
        while len(ready) < replicas:
            if process.poll() is not None:
                raise RuntimeError(f"serve --ray exited with {process.returncode}; see {log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(ready)} replicas ready after {STARTUP_TIMEOUT:.0f} s")
            # Concurrent probes: Serve sends them to the less busy replicas, so all are seen.
            ready.update(filter(None, pool.map(_ready_replica, [url] * 4)))
            time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> list[str]:
    """SIGINT, as Ctrl-C; then whatever Ray process outlived the command is killed and named."""
    if process.poll() is not None:
        return []
    # Ray's processes (GCS, raylet, controller, proxy, replicas) descend from the command.
    started = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGINT)
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    _, alive = psutil.wait_procs(started, timeout=STOP_TIMEOUT)
    left = []
    for leftover in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            left.append(" ".join(leftover.cmdline()[:2]) or leftover.name())
            leftover.kill()
    return left


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of ``serve --ray --replicas 2`` on the small profile, for the whole module."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORE_", "RAY_"))}
    env.update(CORE_API_KEYS=TEST_API_KEY, CORE_MODEL_PROFILE="small", CORE_CHAT_THREADS="1")
    log = tmp_path_factory.mktemp("ray_serve") / "serve.log"
    command = [sys.executable, "-m", "backend.cli", "serve", "--ray", "--replicas", "2"]
    command += ["--profile", "small", "--host", LOOPBACK, "--port", str(port)]
    with log.open("wb") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://{LOOPBACK}:{port}"
    try:
        _wait_ready(url, process, str(log), replicas=2)
        yield url
    finally:
        left = _stop(process)
    assert process.returncode == 0, f"serve --ray exited with {process.returncode}; see {log}"
    assert not left, f"Ray processes outlived serve --ray: {left}"


@pytest.fixture(scope="module")
def http(cluster: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster, headers=AUTH, timeout=120) as client:
        yield client


@pytest.mark.model
def test_both_replicas_answer(http):
    texts = [f"sentence number {i}" for i in range(32)]

    def embed(text: str) -> str:
        response = http.post(
            "/v1/core/embeddings", json={"model": "core-embedding-1-large-query", "input": text}
        )
        assert response.status_code == 200
        return response.headers["x-served-by"]

    with ThreadPoolExecutor(4) as pool:
        served = collections.Counter(pool.map(embed, texts))
    print(f"requests per replica: {dict(served)}")
    assert len(served) == 2
    assert all(name.startswith(REPLICA_PREFIX) for name in served)


@pytest.mark.model
def test_keys_are_required(cluster):
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = httpx.get(f"{cluster}/v1/core/models", headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "authentication_error"
        assert response.headers["x-served-by"].startswith(REPLICA_PREFIX)


@pytest.mark.model
def test_a_chat_stream_ends_with_done(http):
    request = {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
    }
    with http.stream("POST", "/v1/core/chat/completions", json=request) as response:
        assert response.status_code == 200
        assert response.headers["x-served-by"].startswith(REPLICA_PREFIX)
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    assert len(events) > 2


@pytest.mark.model
def test_embeddings_equal_the_in_process_ones(http, small_backend):
    for model in ("core-embedding-1-large-query", "core-embedding-1-large-passage"):
        request = {"model": model, "input": ["Ray Serve runs replicas.", "서울의 날씨"]}
        response = http.post("/v1/core/embeddings", json=request)
        assert response.status_code == 200
        served = [item["embedding"] for item in response.json()["data"]]
        local = [item.embedding for item in small_backend.embed(request).data]
        for a, b in zip(served, local, strict=True):
            cosine = sum(x * y for x, y in zip(a, b, strict=True)) / math.hypot(*a) / math.hypot(*b)
            assert cosine >= 0.9999


@pytest.mark.model
def test_ready_and_health(cluster):
    ready = httpx.get(f"{cluster}/ready")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    assert ready.headers["x-served-by"].startswith(REPLICA_PREFIX)
    assert httpx.get(f"{cluster}/health").json() == {"status": "ok", "ready": True}


def test_serve_run_arguments_build_the_application(monkeypatch):
    """``serve run backend.server.ray_serve:app_builder k=v ...`` hands strings over."""
    monkeypatch.setenv("CORE_API_KEYS", "k1")
    app = app_builder(
        {"profile": "small", "replicas": "2", "num_cpus": "0.25", "grounded_at": "0.6"}
    )
    deployment = app._bound_deployment  # Ray keeps what bind() was given here
    assert deployment.num_replicas == 2
    assert deployment.ray_actor_options["num_cpus"] == 0.25
    options, settings = deployment.init_args
    assert options == {"profile": "small", "grounded_at": 0.6}
    assert settings.api_keys == ("k1",)


def test_serve_run_refuses_to_start_without_keys():
    with pytest.raises(ValueError, match="no API keys configured"):
        app_builder({"profile": "small"})
