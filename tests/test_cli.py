"""The ``core-textmodels`` command's plumbing: which backend each set of flags builds and how
``serve`` serves it, with ``connect``, ``run_server`` and ``run_replicas`` replaced by fakes
(no engine, no Ray, no server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backend import cli
from backend.testing import scripted_backend

ENGINE_FLAGS = [
    "--engine-url", "http://127.0.0.1:8080/v1",
    "--engine-chat-model", "qwen-7b",
    "--engine-embeddings-url", "http://127.0.0.1:8081/v1",
    "--engine-embedding-model", "e5",
    "--engine-embedding-tokenizer", "/models/e5-tokenizer",
    "--engine-api-key", "engine-secret",
    "--grounded-at", "0.6",
    "--not-grounded-below", "0.3",
    "--judge-calibration", "small",
]  # fmt: skip
ENGINE_OPTIONS = {
    "engine_url": "http://127.0.0.1:8080/v1",
    "chat_model": "qwen-7b",
    "embeddings_url": "http://127.0.0.1:8081/v1",
    "embedding_model": "e5",
    "embedding_tokenizer": "/models/e5-tokenizer",
    "engine_api_key": "engine-secret",
    "grounded_at": 0.6,
    "not_grounded_below": 0.3,
    "judge_calibration": "small",
}


class Recorder:
    """Stands in for a function and keeps the keywords of each call."""

    def __init__(self, result: Any = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.result = result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append({**dict(enumerate(args)), **kwargs})
        return self.result


@pytest.fixture
def connect(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    fake = Recorder(scripted_backend("It is sunny."))
    monkeypatch.setattr(cli, "connect", fake)
    return fake


@pytest.fixture
def run_server(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    from backend.server import runner

    fake = Recorder()
    monkeypatch.setattr(runner, "run_server", fake)
    return fake


def test_serve_on_an_engine_connects_with_the_given_options_only(connect, run_server):
    flags = ["--engine-url", "http://e/v1", "--engine-chat-model", "m", "--grounded-at", "0.7"]
    assert cli.main(["serve", "--port", "9001", *flags]) == 0
    assert connect.calls == [{"engine_url": "http://e/v1", "chat_model": "m", "grounded_at": 0.7}]
    assert run_server.calls == [
        {
            "host": "127.0.0.1",
            "port": 9001,
            "no_auth": False,
            "key_file": None,
            "profile": None,
            "chat_engine": None,
            "backend": connect.result,
        }
    ]


def test_serve_with_every_engine_flag(connect, run_server):
    assert cli.main(["serve", *ENGINE_FLAGS]) == 0
    assert connect.calls == [ENGINE_OPTIONS]


def test_serve_without_an_engine_runs_the_in_process_models(connect, run_server):
    assert cli.main(["serve", "--profile", "small", "--api-key-file", "keys.txt"]) == 0
    assert connect.calls == []  # the runner builds the in-process backend itself
    assert run_server.calls[0]["profile"] == "small"
    assert run_server.calls[0]["backend"] is None
    assert run_server.calls[0]["key_file"] == "keys.txt"


def test_serve_on_ray_hands_the_options_to_each_replica(monkeypatch, connect):
    pytest.importorskip("ray.serve")
    from backend.server import ray_serve

    run_replicas = Recorder()
    monkeypatch.setattr(ray_serve, "run_replicas", run_replicas)
    argv = ["serve", "--ray", "--replicas", "3", "--num-cpus", "0.25", "--host", "0.0.0.0"]
    assert cli.main([*argv, "--no-auth", *ENGINE_FLAGS]) == 0
    assert connect.calls == []  # each replica connects for itself
    assert run_replicas.calls == [
        {
            0: ENGINE_OPTIONS,
            "host": "0.0.0.0",
            "port": 8000,
            "replicas": 3,
            "num_cpus": 0.25,
            "key_file": None,
            "no_auth": True,
        }
    ]
    assert cli.main(["serve", "--ray", "--profile", "small"]) == 0
    assert run_replicas.calls[-1][0] == {"profile": "small"}
    assert run_replicas.calls[-1]["replicas"] == 1


@pytest.mark.parametrize(
    ("argv", "printed"),
    [
        (["chat", "hi", "--no-stream"], "It is sunny."),
        (["chat", "hi"], "It is sunny."),
        (["check", "--context", "c", "--response", "r"], None),
        (["embed", "hello"], None),
    ],
)
def test_commands_connect_to_the_engine(connect, capsys, argv, printed):
    assert cli.main([*argv, *ENGINE_FLAGS]) == 0
    assert connect.calls == [{"api_key": None, **ENGINE_OPTIONS}]
    out = capsys.readouterr().out
    if printed is not None:
        assert out.strip() == printed
    elif argv[0] == "embed":
        assert json.loads(out)["index"] == 0


def test_commands_without_flags_connect_to_the_defaults(connect):
    assert cli.main(["chat", "hi", "--no-stream", "--profile", "small"]) == 0
    assert cli.main(["chat", "hi", "--no-stream", "--base-url", "http://s", "--api-key", "k"]) == 0
    assert connect.calls == [
        {"api_key": None, "profile": "small"},
        {"base_url": "http://s", "api_key": "k"},
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--engine-api-key", "x"], "--engine-api-key needs --engine-url"),
        (["chat", "hi", "--judge-calibration", "small"], "--judge-calibration needs --engine-url"),
        (
            ["chat", "hi", "--base-url", "http://s", "--engine-url", "http://e"],
            "exclude each other",
        ),
        (["serve", "--profile", "small", "--engine-url", "http://e"], "exclude each other"),
        (["serve", "--replicas", "2"], "--replicas and --num-cpus need --ray"),
        (["serve", "--judge-calibration", "huge"], "invalid choice"),
    ],
)
def test_flags_that_would_be_ignored_are_refused(connect, run_server, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert connect.calls == [] and run_server.calls == []


def test_check_marks_the_claims_the_context_does_not_support(monkeypatch, capsys):
    from backend.testing import EchoChatEngine, offline_backend

    monkeypatch.setattr(cli, "connect", Recorder(offline_backend(EchoChatEngine())))
    context, response = "The tower is 330 m tall.", "The tower is 330 m tall. It is blue."
    assert cli.main(["check", "--context", context, "--response", response, "--marked"]) == 0
    verdict, marked = capsys.readouterr().out.splitlines()
    assert verdict == "notGrounded"
    assert marked.startswith("The tower is 330 m tall. [[notGrounded 0.")
    assert marked.endswith(": It is blue.]]")
    assert cli.main(["check", "--context", context, "--response", response, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["corrected_response"] == "The tower is 330 m tall."
