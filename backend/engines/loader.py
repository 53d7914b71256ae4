"""Building the configured engines (imports torch lazily: HTTP-only users never need it)."""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path

from backend.config import EngineConfig
from backend.engines.base import ChatEngine, EmbeddingEngine

logger = logging.getLogger(__name__)


def load_chat_engine(config: EngineConfig) -> ChatEngine:
    started = time.perf_counter()
    if chat_engine_kind(config) == "llama.cpp":
        engine = _load_llamacpp_engine(config)
    else:
        from backend.engines.transformers_chat import TransformersChatEngine
        from backend.weights.embedded_chat import resolve_chat_model

        engine = TransformersChatEngine(
            resolve_chat_model(config.chat_model), device=config.device, dtype=config.chat_dtype
        )
    logger.info(
        "chat model %s loaded on %s in %.1f s",
        config.chat_model,
        engine.device,
        time.perf_counter() - started,
    )
    return engine


def chat_engine_kind(config: EngineConfig) -> str:
    """``llama.cpp`` or ``transformers``: what runs the chat model under these settings.

    ``auto`` picks llama.cpp for GGUF weights (the embedded models, a ``.gguf`` file) on a CPU
    when llama-cpp-python is installed: it decodes the 4-bit weights several times faster than
    transformers can decode them dequantized. GPUs and Hugging Face models get transformers.
    """
    if config.chat_engine == "transformers":
        return "transformers"
    gguf = _is_gguf(config.chat_model)
    installed = importlib.util.find_spec("llama_cpp") is not None
    if config.device is None:
        on_cpu = not _cuda_available()
    else:
        on_cpu = str(config.device) == "cpu"
    if config.chat_engine == "llama.cpp":
        problems = []
        if not gguf:
            problems.append(f"{config.chat_model!r} is not an embedded model or a .gguf file")
        if not installed:
            problems.append("llama-cpp-python is not installed (pip install llama-cpp-python)")
        if not on_cpu:
            problems.append(f"this build runs on the CPU only, not on {config.device}")
        if problems:
            raise ValueError("the llama.cpp chat engine cannot run: " + "; ".join(problems))
        return "llama.cpp"
    return "llama.cpp" if gguf and installed and on_cpu else "transformers"


def groundedness_engine_kind(config: EngineConfig) -> str:
    """``chat`` (the chat engine reads the judge's prompts) or ``transformers`` (a bf16
    transformers copy of the chat model does).

    The judge only evaluates prompts, never decodes. On a CPU with AMX, torch's bf16 matmuls
    evaluate them about four times faster than llama.cpp's 4-bit kernels (measured: 450 vs 98
    tokens/s for the 1.5B model on 2 cores), so ``auto`` loads the copy there when the chat
    model runs on llama.cpp; elsewhere the chat engine is as fast and no second copy is kept.
    With AVX512-BF16 but no AMX (an AMD EPYC, 2 cores) the copy evaluated one prompt only 1.4
    times faster (64 vs 46 tokens/s), and over the evaluation set it was slower end to end,
    because llama.cpp reuses the cached prefix that the judge's prompts share (worked examples,
    the document chunk) and the copy re-reads it; its balanced accuracy was no better (0.895
    vs 0.899, with the support question alone), so such CPUs keep the chat engine.
    """
    chat_kind = chat_engine_kind(config)
    if config.groundedness_engine == "transformers":
        if chat_kind == "transformers":
            return "chat"  # the chat engine is that already
        if _is_gguf_file(config.chat_model):
            raise ValueError(
                "CORE_GROUNDEDNESS_ENGINE=transformers needs a model transformers can load; "
                f"{config.chat_model!r} is a GGUF file"
            )
        return "transformers"
    if config.groundedness_engine == "chat" or chat_kind != "llama.cpp":
        return "chat"
    from backend.engines.torch_placement import cpu_has_amx

    return "transformers" if not _is_gguf_file(config.chat_model) and cpu_has_amx() else "chat"


def load_groundedness_engine(config: EngineConfig, chat_engine: ChatEngine) -> ChatEngine:
    """The engine the groundedness judge reads its prompts with (see above).

    With ``auto``, the copy is loaded only when the engine actually loaded evaluates prompts
    with quantized kernels: a chat engine put in place of the configured one (an operator's
    plug-in, the tests' fakes) is the judge's reader too.
    """
    if groundedness_engine_kind(config) == "chat":
        return chat_engine
    if config.groundedness_engine == "auto" and not chat_engine.quantized_prompt_evaluation:
        return chat_engine
    from backend.engines.transformers_chat import TransformersChatEngine
    from backend.weights.embedded_chat import resolve_chat_model

    started = time.perf_counter()
    engine = TransformersChatEngine(
        resolve_chat_model(config.chat_model), device="cpu", dtype=config.chat_dtype
    )
    logger.info(
        "groundedness judge: %s on transformers (%s) loaded in %.1f s",
        config.chat_model,
        engine.model.dtype,
        time.perf_counter() - started,
    )
    return engine


def groundedness_reader(engine: ChatEngine) -> str:
    """Which calibration an engine reading the judge's prompts needs (``backend.config.
    GROUNDEDNESS_CALIBRATIONS``): ``llama.cpp`` for quantized prompt evaluation, else
    ``transformers``."""
    return "llama.cpp" if engine.quantized_prompt_evaluation else "transformers"


def _is_gguf_file(chat_model: str) -> bool:
    return chat_model.lower().endswith(".gguf")


def _is_gguf(chat_model: str) -> bool:
    from backend.weights.embedded_chat import EMBEDDED_CHAT_MODELS

    return chat_model in EMBEDDED_CHAT_MODELS or _is_gguf_file(chat_model)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _load_llamacpp_engine(config: EngineConfig) -> ChatEngine:
    from transformers import AutoTokenizer, GenerationConfig

    from backend.engines.llamacpp_chat import LlamaCppChatEngine
    from backend.weights.embedded_chat import embedded_gguf

    embedded = embedded_gguf(config.chat_model)
    if embedded is not None:
        gguf_path, tokenizer_folder = embedded
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder, local_files_only=True)
        eos = GenerationConfig.from_pretrained(tokenizer_folder).eos_token_id
    else:  # a user's own .gguf file: its tokenizer is built from the file's vocabulary
        gguf_path = Path(config.chat_model).expanduser()
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        eos = tokenizer.eos_token_id
    eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
    for name in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
        if name in tokenizer.get_vocab():
            eos_ids.add(tokenizer.convert_tokens_to_ids(name))
    return LlamaCppChatEngine(gguf_path, tokenizer, frozenset(eos_ids))


def load_embedding_engine(config: EngineConfig) -> EmbeddingEngine:
    from backend.engines.transformers_embeddings import TransformersEmbeddingEngine
    from backend.weights.embedded_e5 import resolve_embedding_model

    started = time.perf_counter()
    engine = TransformersEmbeddingEngine(
        resolve_embedding_model(config.embedding_model),
        device=config.device,
        dtype=config.embedding_dtype,
    )
    logger.info(
        "embedding model %s loaded on %s in %.1f s",
        config.embedding_model,
        engine.device,
        time.perf_counter() - started,
    )
    return engine
