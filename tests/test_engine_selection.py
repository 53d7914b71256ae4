"""Which chat engine runs a model: offline checks of ``chat_engine_kind`` and its settings."""

from __future__ import annotations

import importlib.util

import pytest

from backend.config import EngineConfig
from backend.engines import loader
from backend.engines.loader import chat_engine_kind
from tests.fakes import EchoChatEngine

EMBEDDED = "qwen2.5-coder-0.5b-instruct"


@pytest.fixture
def llama_cpp_installed(monkeypatch: pytest.MonkeyPatch):
    """Pretend llama-cpp-python is (or is not) installed and no GPU is present."""
    real_find_spec = importlib.util.find_spec

    def set_installed(installed: bool) -> None:
        monkeypatch.setattr(
            loader.importlib.util,
            "find_spec",
            lambda name: (
                (object() if installed else None) if name == "llama_cpp" else real_find_spec(name)
            ),
        )

    monkeypatch.setattr(loader, "_cuda_available", lambda: False)
    return set_installed


@pytest.mark.parametrize(
    ("chat_model", "device", "installed", "expected"),
    [
        (EMBEDDED, None, True, "llama.cpp"),
        (EMBEDDED, "cpu", True, "llama.cpp"),
        ("/models/my-model.Q5_K_M.GGUF", None, True, "llama.cpp"),
        (EMBEDDED, "cuda", True, "transformers"),  # this llama.cpp build is CPU-only
        (EMBEDDED, None, False, "transformers"),
        ("Qwen/Qwen2.5-7B-Instruct", None, True, "transformers"),
    ],
)
def test_auto_picks_llama_cpp_for_gguf_weights_on_a_cpu(
    llama_cpp_installed, chat_model, device, installed, expected
):
    llama_cpp_installed(installed)
    config = EngineConfig(chat_model=chat_model, device=device)
    assert chat_engine_kind(config) == expected


def test_auto_prefers_transformers_when_a_gpu_is_present(llama_cpp_installed, monkeypatch):
    llama_cpp_installed(True)
    monkeypatch.setattr(loader, "_cuda_available", lambda: True)
    assert chat_engine_kind(EngineConfig(chat_model=EMBEDDED)) == "transformers"


def test_transformers_can_be_asked_for_explicitly(llama_cpp_installed):
    llama_cpp_installed(True)
    config = EngineConfig(chat_model=EMBEDDED, chat_engine="transformers")
    assert chat_engine_kind(config) == "transformers"


def test_asking_for_llama_cpp_where_it_cannot_run_says_why(llama_cpp_installed):
    llama_cpp_installed(False)
    config = EngineConfig(
        chat_model="Qwen/Qwen2.5-7B-Instruct", device="cuda", chat_engine="llama.cpp"
    )
    with pytest.raises(ValueError) as raised:
        chat_engine_kind(config)
    message = str(raised.value)
    assert "not an embedded model or a .gguf file" in message
    assert "pip install llama-cpp-python" in message
    assert "CPU only" in message


def test_the_engine_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CORE_CHAT_ENGINE", "transformers")
    assert EngineConfig.from_env().chat_engine == "transformers"
    monkeypatch.setenv("CORE_CHAT_ENGINE", "vllm")
    with pytest.raises(
        ValueError, match="unknown chat engine 'vllm'; use one of: auto, llama.cpp, transformers"
    ):
        EngineConfig.from_env()


@pytest.mark.parametrize(
    ("chat_model", "chat_engine", "setting", "amx", "expected"),
    [
        (EMBEDDED, "auto", "auto", True, "transformers"),  # llama.cpp chat, AMX: a bf16 copy
        (EMBEDDED, "auto", "auto", False, "chat"),  # no AMX: llama.cpp is as fast
        ("/models/mine.Q4_K_M.gguf", "auto", "auto", True, "chat"),  # transformers cannot load it
        (EMBEDDED, "transformers", "auto", True, "chat"),  # the chat engine is transformers
        (EMBEDDED, "auto", "chat", True, "chat"),
        (EMBEDDED, "auto", "transformers", False, "transformers"),
    ],
)
def test_what_reads_the_groundedness_prompts(
    llama_cpp_installed, monkeypatch, chat_model, chat_engine, setting, amx, expected
):
    from backend.engines import torch_placement

    llama_cpp_installed(True)
    monkeypatch.setattr(torch_placement, "cpu_has_amx", lambda: amx)
    config = EngineConfig(
        chat_model=chat_model, chat_engine=chat_engine, groundedness_engine=setting
    )
    assert loader.groundedness_engine_kind(config) == expected


def test_a_chat_engine_put_in_place_of_llama_cpp_reads_the_judge_prompts_itself(
    llama_cpp_installed, monkeypatch
):
    """A plug-in engine (here the echo fake) replacing the configured llama.cpp one is not
    slow at prompts: no bf16 copy of the configured model is loaded beside it."""
    from backend.engines import torch_placement

    llama_cpp_installed(True)
    monkeypatch.setattr(torch_placement, "cpu_has_amx", lambda: True)
    config = EngineConfig(chat_model=EMBEDDED, groundedness_engine="auto")
    assert loader.groundedness_engine_kind(config) == "transformers"
    plug_in = EchoChatEngine()
    assert loader.load_groundedness_engine(config, plug_in) is plug_in


def test_a_gguf_file_cannot_be_judged_by_transformers(llama_cpp_installed):
    llama_cpp_installed(True)
    config = EngineConfig(chat_model="/models/mine.gguf", groundedness_engine="transformers")
    with pytest.raises(ValueError, match="GGUF file"):
        loader.groundedness_engine_kind(config)


def test_the_groundedness_engine_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CORE_GROUNDEDNESS_ENGINE", "chat")
    assert EngineConfig.from_env().groundedness_engine == "chat"
    monkeypatch.setenv("CORE_GROUNDEDNESS_ENGINE", "gpu")
    with pytest.raises(ValueError, match="unknown groundedness engine 'gpu'"):
        EngineConfig.from_env()


@pytest.mark.parametrize("profile", ["default", "small"])
@pytest.mark.parametrize(("quantized", "reader"), [(True, "llama.cpp"), (False, "transformers")])
def test_the_judge_uses_the_thresholds_calibrated_for_its_reader(profile, quantized, reader):
    """llama.cpp (4-bit) and transformers (bf16) give slightly different P(yes)."""
    from backend.config import judge_calibration
    from backend.inprocess import InProcessBackend
    from tests.fakes import CharCountEmbeddingEngine

    engine = EchoChatEngine()
    engine.quantized_prompt_evaluation = quantized
    service = InProcessBackend(
        profile=profile, chat_engine=engine, embedding_engine=CharCountEmbeddingEngine()
    )
    assert service.judge_calibration() == judge_calibration(profile, reader)


def test_configured_thresholds_win_over_the_calibrated_ones():
    from backend.inprocess import InProcessBackend
    from tests.fakes import CharCountEmbeddingEngine

    service = InProcessBackend(
        chat_engine=EchoChatEngine(),
        embedding_engine=CharCountEmbeddingEngine(),
        grounded_at=1.0,  # nothing is grounded and nothing is not: every verdict is notSure
        not_grounded_below=0.0,
    )
    calibration = service.judge_calibration()
    assert (calibration.grounded_at, calibration.not_grounded_below) == (1.0, 0.0)
    verdict = service.chat(
        {
            "model": "core-1-mini-groundedness-check",
            "messages": [
                {"role": "user", "content": "The sky is blue."},
                {"role": "assistant", "content": "The sky is blue."},
            ],
        }
    )
    assert verdict.choices[0].message.content == "notSure"  # the fake's P(yes) is 0.999
