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

    The judge only evaluates prompts, never decodes. On a CPU with AMX, torch's bf16 matmuls
    evaluate them several times faster than llama.cpp's 4-bit kernels, so ``auto`` loads the
    copy there when the chat engine evaluates prompts with quantized kernels; elsewhere the
    chat engine is as fast or faster (llama.cpp reuses the cached prefix that the judge's
    prompts share, which the copy re-reads) and no second copy is kept (benchmarks/README.md).
    ``chat`` always reads with the chat engine, ``transformers`` with the copy unless the chat
    engine is a transformers one already. A chat engine put in place of the configured one
    (an operator's plug-in, the tests' doubles) reads for itself under ``auto``.

    Raises:
        ValueError: ``transformers`` asked for a model that transformers cannot load.
    """
    if requested == "chat" or not chat_engine.quantized_prompt_evaluation:
        return False
    if requested == "transformers":
        if is_gguf_file(chat_model):
            raise ValueError(
                "CORE_GROUNDEDNESS_ENGINE=transformers needs a model transformers can load; "
                f"{chat_model!r} is a GGUF file"
            )
        return True
    from backend.engines.torch_placement import cpu_has_amx

    return not is_gguf_file(chat_model) and cpu_has_amx()


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
