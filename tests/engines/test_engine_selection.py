"""Which engine runs what: offline checks of ``backend.engines.selection`` and its settings."""

from __future__ import annotations

import importlib.util

import pytest

from backend.backends.local import InProcessBackend
from backend.backends.local.config import EngineConfig
from backend.engines import selection
from backend.engines.selection import chat_engine_kind, judge_reads_with_copy
from backend.groundedness.calibration import calibration_for
from backend.testing import CharCountEmbeddingEngine, EchoChatEngine

EMBEDDED = "qwen2.5-coder-0.5b-instruct"


@pytest.fixture
def llama_cpp_installed(monkeypatch: pytest.MonkeyPatch):
    """Pretend llama-cpp-python is (or is not) installed and no GPU is present."""
    real_find_spec = importlib.util.find_spec

    def set_installed(installed: bool) -> None:
        monkeypatch.setattr(
            selection.importlib.util,
            "find_spec",
            lambda name: (
                (object() if installed else None) if name == "llama_cpp" else real_find_spec(name)
            ),
        )

    monkeypatch.setattr(selection, "_cuda_available", lambda: False)
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
    assert chat_engine_kind(chat_model, "auto", device) == expected


def test_auto_prefers_transformers_when_a_gpu_is_present(llama_cpp_installed, monkeypatch):
    llama_cpp_installed(True)
    monkeypatch.setattr(selection, "_cuda_available", lambda: True)
    assert chat_engine_kind(EMBEDDED) == "transformers"


def test_transformers_can_be_asked_for_explicitly(llama_cpp_installed):
    llama_cpp_installed(True)
    assert chat_engine_kind(EMBEDDED, "transformers") == "transformers"


def test_asking_for_llama_cpp_where_it_cannot_run_says_why(llama_cpp_installed):
    llama_cpp_installed(False)
    with pytest.raises(ValueError) as raised:
        chat_engine_kind("Qwen/Qwen2.5-7B-Instruct", "llama.cpp", "cuda")
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


def _chat_engine(quantized: bool) -> EchoChatEngine:
    """A chat engine that evaluates prompts as llama.cpp does (quantized) or not."""
    engine = EchoChatEngine()
    engine.quantized_prompt_evaluation = quantized
    return engine


@pytest.mark.parametrize("amx", [True, False])
@pytest.mark.parametrize(
    ("chat_model", "quantized", "setting", "copy"),
    [
        (EMBEDDED, True, "auto", False),  # the chat engine reads, on every CPU
        ("/models/mine.Q4_K_M.gguf", True, "auto", False),
        (EMBEDDED, False, "auto", False),
        (EMBEDDED, False, "transformers", False),  # the chat engine is transformers already
        (EMBEDDED, True, "chat", False),
        (EMBEDDED, True, "transformers", True),  # the opt-in bf16 copy
    ],
)
def test_what_reads_the_groundedness_prompts(
    monkeypatch, chat_model, quantized, setting, copy, amx
):
    """The choice is the same whether or not the CPU has AMX (the probe forced each way)."""
    from backend.engines import torch_placement

    monkeypatch.setattr(torch_placement, "cpu_has_amx", lambda: amx)
    assert judge_reads_with_copy(setting, chat_model, _chat_engine(quantized)) is copy


@pytest.mark.parametrize("amx", [True, False])
def test_a_chat_engine_put_in_place_of_llama_cpp_reads_the_judge_prompts_itself(monkeypatch, amx):
    """A plug-in engine (here the echo fake) replacing the configured llama.cpp one reads the
    judge's prompts itself, whatever the CPU: no bf16 copy of the configured model is loaded
    beside it, and the judge takes its turns with the chat requests."""
    from backend.engines import torch_placement

    monkeypatch.setattr(torch_placement, "cpu_has_amx", lambda: amx)
    plug_in = EchoChatEngine()
    service = InProcessBackend(
        chat_model=EMBEDDED,
        chat_engine_instance=plug_in,
        embedding_engine_instance=CharCountEmbeddingEngine(),
    )
    reader = service.judge_reader()
    assert reader.engine is plug_in and reader.describe() == "transformers (chat engine)"
    with reader.turn():  # the chat engine's own lock: a chat request waits for the judge
        assert not service._chat.turn().acquire(blocking=False)


def test_a_gguf_file_cannot_be_judged_by_transformers():
    with pytest.raises(ValueError, match="GGUF file"):
        judge_reads_with_copy("transformers", "/models/mine.gguf", _chat_engine(True))


def test_the_groundedness_engine_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CORE_GROUNDEDNESS_ENGINE", "chat")
    assert EngineConfig.from_env().groundedness_engine == "chat"
    monkeypatch.setenv("CORE_GROUNDEDNESS_ENGINE", "gpu")
    with pytest.raises(ValueError, match="unknown groundedness engine 'gpu'"):
        EngineConfig.from_env()


@pytest.mark.parametrize("amx", [True, False])
@pytest.mark.parametrize("profile", ["default", "small"])
@pytest.mark.parametrize(("quantized", "reader"), [(True, "llama.cpp"), (False, "transformers")])
def test_the_judge_uses_the_thresholds_calibrated_for_its_reader(
    monkeypatch, profile, quantized, reader, amx
):
    """llama.cpp (4-bit) and transformers (bf16) give slightly different P(yes); the reader
    is the chat engine's on every CPU (the probe forced each way), so no copy is loaded."""
    from backend.engines import torch_placement

    monkeypatch.setattr(torch_placement, "cpu_has_amx", lambda: amx)
    service = InProcessBackend(
        profile=profile,
        chat_engine_instance=_chat_engine(quantized),
        embedding_engine_instance=CharCountEmbeddingEngine(),
    )
    assert service.judge_reader().describe() == f"{reader} (chat engine)"
    # The doubles expose no hidden states: the P(yes) calibration of their reader.
    assert service.judge_calibration() == calibration_for(
        profile, reader, reads_hidden_states=False
    )


def test_configured_thresholds_win_over_the_calibrated_ones():
    service = InProcessBackend(
        chat_engine_instance=EchoChatEngine(),
        embedding_engine_instance=CharCountEmbeddingEngine(),
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
