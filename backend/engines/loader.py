"""Building engines (imports torch lazily: HTTP-only users never need it).

What runs where is decided in ``backend.engines.selection``; this module only builds what
it is told to.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from backend.engines.base import ChatEngine, EmbeddingEngine, FactChecker

logger = logging.getLogger(__name__)


def load_chat_engine(
    chat_model: str,
    kind: str,
    device: str | None = None,
    dtype: str | None = None,
    **llamacpp_options,
) -> ChatEngine:
    """The chat engine ``kind`` (``llama.cpp`` or ``transformers``) running ``chat_model``;
    ``llamacpp_options`` go to ``LlamaCppChatEngine`` (``max_context``, ``deterministic``...)."""
    started = time.perf_counter()
    if kind == "llama.cpp":
        engine = _load_llamacpp_engine(chat_model, **llamacpp_options)
    else:
        engine = _load_transformers_engine(chat_model, device, dtype)
    logger.info(
        "chat model %s loaded on %s in %.1f s",
        chat_model,
        engine.device,
        time.perf_counter() - started,
    )
    return engine


def load_judge_copy(chat_model: str, dtype: str | None = None) -> ChatEngine:
    """A transformers copy of the chat model on the CPU, to read the groundedness judge's
    prompts (see ``selection.judge_reads_with_copy``)."""
    started = time.perf_counter()
    engine = _load_transformers_engine(chat_model, "cpu", dtype)
    logger.info(
        "groundedness judge: %s on transformers (%s) loaded in %.1f s",
        chat_model,
        engine.model.dtype,
        time.perf_counter() - started,
    )
    return engine


def judge_model_kind(judge_model: str) -> str:
    """``causal``, ``classifier`` or ``seq2seq`` (``judge_kinds``): GGUF weights and embedded
    models are causal; anything else says so in its configuration (asked of the hub for a
    model id not on this machine).

    Raises:
        ValueError: a model of none of these kinds (the message names them).
    """
    from backend.engines.judge_kinds import is_gguf_or_embedded, judge_kind

    if is_gguf_or_embedded(judge_model):
        return "causal"
    from transformers import AutoConfig

    local_only = Path(judge_model).expanduser().is_dir()
    config = AutoConfig.from_pretrained(judge_model, local_files_only=local_only)
    return judge_kind(config.to_dict(), judge_model)


def load_judge_model(
    judge_model: str, chat_kind: str, device: str | None = None, dtype: str | None = None
) -> ChatEngine | FactChecker:
    """The model the user named to read the groundedness judge's prompts: a fact-checker
    (``fact_checkers``) or a chat engine of ``chat_kind`` (``selection.chat_engine_kind``)."""
    kind = judge_model_kind(judge_model)
    if kind == "causal":
        return load_chat_engine(judge_model, chat_kind, device, dtype)
    from backend.engines.fact_checkers import load_fact_checker

    started = time.perf_counter()
    checker = load_fact_checker(judge_model, kind, device, dtype)
    logger.info(
        "groundedness judge: %s checker %s loaded on %s in %.1f s",
        kind,
        judge_model,
        checker.device,
        time.perf_counter() - started,
    )
    return checker


def _load_transformers_engine(chat_model: str, device: str | None, dtype: str | None):
    from backend.engines.transformers_chat import TransformersChatEngine
    from backend.engines.weights.embedded_chat import resolve_chat_model

    return TransformersChatEngine(resolve_chat_model(chat_model), device=device, dtype=dtype)


def _load_llamacpp_engine(chat_model: str, **options) -> ChatEngine:
    from transformers import AutoTokenizer, GenerationConfig

    from backend.engines.llamacpp_chat import LlamaCppChatEngine
    from backend.engines.weights.embedded_chat import embedded_gguf

    embedded = embedded_gguf(chat_model)
    if embedded is not None:
        gguf_path, tokenizer_folder = embedded
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder, local_files_only=True)
        eos = GenerationConfig.from_pretrained(tokenizer_folder).eos_token_id
    else:  # a user's own .gguf file: its tokenizer is built from the file's vocabulary
        gguf_path = Path(chat_model).expanduser()
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        eos = tokenizer.eos_token_id
    eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
    for name in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
        if name in tokenizer.get_vocab():
            eos_ids.add(tokenizer.convert_tokens_to_ids(name))
    return LlamaCppChatEngine(gguf_path, tokenizer, frozenset(eos_ids), **options)


def load_embedding_engine(
    embedding_model: str, device: str | None = None, dtype: str | None = None
) -> EmbeddingEngine:
    from backend.engines.transformers_embeddings import TransformersEmbeddingEngine
    from backend.engines.weights.embedded_e5 import resolve_embedding_model

    started = time.perf_counter()
    engine = TransformersEmbeddingEngine(
        resolve_embedding_model(embedding_model), device=device, dtype=dtype
    )
    logger.info(
        "embedding model %s loaded on %s in %.1f s",
        embedding_model,
        engine.device,
        time.perf_counter() - started,
    )
    return engine
