"""Which engine runs the chat model, and which reads the groundedness judge's prompts.

Each question is answered here once; the in-process backend asks, the loader builds.
"""

from __future__ import annotations

import importlib.util

from backend.engines.base import ChatEngine

#: Values of ``CORE_CHAT_ENGINE``.
CHAT_ENGINES = ("auto", "llama.cpp", "transformers")
#: Values of ``CORE_GROUNDEDNESS_ENGINE``.
JUDGE_READERS = ("auto", "chat", "transformers")


def is_gguf_file(chat_model: str) -> bool:
    return chat_model.lower().endswith(".gguf")


def runs_from_gguf(chat_model: str) -> bool:
    """Whether the model's weights are a GGUF file: an embedded model, or a ``.gguf`` path."""
    from backend.engines.weights.embedded_chat import EMBEDDED_CHAT_MODELS

    return chat_model in EMBEDDED_CHAT_MODELS or is_gguf_file(chat_model)


def chat_engine_kind(chat_model: str, requested: str = "auto", device: str | None = None) -> str:
    """``llama.cpp`` or ``transformers``: what runs ``chat_model``.

    ``auto`` picks llama.cpp for GGUF weights (the embedded models, a ``.gguf`` file) on a CPU
    when llama-cpp-python is installed: it decodes the 4-bit weights several times faster than
    transformers can decode them dequantized. GPUs and Hugging Face models get transformers.

    Raises:
        ValueError: ``llama.cpp`` was asked for where it cannot run (the message says why).
    """
    if requested == "transformers":
        return "transformers"
    gguf = runs_from_gguf(chat_model)
    installed = importlib.util.find_spec("llama_cpp") is not None
    on_cpu = not _cuda_available() if device is None else str(device) == "cpu"
    if requested == "llama.cpp":
        problems = []
        if not gguf:
            problems.append(f"{chat_model!r} is not an embedded model or a .gguf file")
        if not installed:
            problems.append("llama-cpp-python is not installed (pip install llama-cpp-python)")
        if not on_cpu:
            problems.append(f"this build runs on the CPU only, not on {device}")
        if problems:
            raise ValueError("the llama.cpp chat engine cannot run: " + "; ".join(problems))
        return "llama.cpp"
    return "llama.cpp" if gguf and installed and on_cpu else "transformers"


def judge_reads_with_copy(requested: str, chat_model: str, chat_engine: ChatEngine) -> bool:
    """Whether a bf16 transformers copy of the chat model, rather than the chat engine, reads
    the groundedness judge's prompts.

    Only when asked: ``transformers`` loads the copy unless the chat engine is a transformers
    one already; ``auto`` and ``chat`` read with the chat engine. The judge then reads with the
    same engine, weights and learned reading on every CPU, so a context and a response get
    the same verdict on an Intel server as on an AMD laptop, the verdicts whose quality
    benchmarks/README.md reports. The copy is an opt-in speed-up for CPUs with AMX, where
    torch's bf16 matmuls evaluate the judge's prompts several times faster than llama.cpp's
    4-bit kernels; it reads P(yes) at its own calibrated thresholds and scores differently
    (benchmarks/README.md, "Which reader the judge gets").

    Raises:
        ValueError: ``transformers`` asked for a model that transformers cannot load.
    """
    if requested != "transformers" or not chat_engine.quantized_prompt_evaluation:
        return False
    if is_gguf_file(chat_model):
        raise ValueError(
            "CORE_GROUNDEDNESS_ENGINE=transformers needs a model transformers can load; "
            f"{chat_model!r} is a GGUF file"
        )
    return True


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
