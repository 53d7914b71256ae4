"""The in-process backend: the whole service running on local models (CPU, or GPU if any).

It loads the engines on first use, and hands each validated request to the room that answers
it: chat (``backend.chat.service``), the groundedness check (``backend.groundedness.service``,
with the judge's reader chosen once, here) and embeddings (``backend.embeddings.service``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from backend.backends.local.config import PROFILE_CHAT_MODELS, EngineConfig
from backend.backends.local.services import ServicesBackend
from backend.backends.local.threads import Lazy
from backend.chat.chain_state import chain_state_reading_for
from backend.chat.responses import PreparedAnswer
from backend.chat.service import ChatService
from backend.embeddings.service import EmbeddingService
from backend.engines.base import ChatEngine, EmbeddingEngine, FactChecker
from backend.engines.selection import CHAT_ENGINES, chat_engine_kind, judge_reads_with_copy
from backend.groundedness.calibration import (
    JudgeCalibration,
    calibration_for,
    checker_thresholds,
    own_thresholds,
)
from backend.groundedness.service import GroundednessService, JudgeReader
from backend.interface import (
    ChatRequestLike,
)
from backend.protocol.catalogue import ModelCard
from backend.protocol.schemas import (
    ChatCompletionRequest,
)
from backend.protocol.validation import parse_request

logger = logging.getLogger(__name__)

T = TypeVar("T")


class LazyEngine(Lazy[T]):
    """An engine loaded on first use, and a lock that serialises its use.

    Most engines are not thread-safe: concurrent callers take turns (``turn``). A
    ``thread_safe`` engine (one that batches concurrent requests) is used without the lock.
    """

    def __init__(self, load: Callable[[], T]) -> None:
        super().__init__(load)
        self._use_lock = threading.Lock()

    def turn(self) -> contextlib.AbstractContextManager:
        """Held while using the engine: its lock, or nothing for a thread-safe engine."""
        if getattr(self.get(), "thread_safe", False):
            return contextlib.nullcontext()
        return self._use_lock


def _check_instance(keyword: str, engine: object, kind: type) -> None:
    """Refuse, at construction, an injected engine that is not a ``kind`` (a string here is
    most likely an engine *choice*, which is ``EngineConfig.chat_engine``)."""
    if engine is None or isinstance(engine, kind):
        return
    hint = (
        "; to choose which engine runs the chat model, pass chat_engine= one of: "
        + ", ".join(CHAT_ENGINES)
        if isinstance(engine, str)
        else ""
    )
    raise TypeError(
        f"{keyword} takes a ready {kind.__name__} object, got {type(engine).__name__} "
        f"{engine!r}{hint}"
    )


class InProcessBackend(ServicesBackend):
    """Runs chat, groundedness and embeddings in this process.

    Args:
        config: which models to run (default: from the environment, see ``EngineConfig``).
        chat_engine_instance / embedding_engine_instance: ready engine objects to use instead
            of loading the configured ones (tests, or sharing one engine between backends);
            they belong to the caller, who closes them.
        **options: ``EngineConfig`` fields overriding the environment (``profile="small"``,
            ``chat_model="Qwen/Qwen2.5-7B-Instruct"``, ``chat_engine="transformers"``,
            ``device="cuda"``...); not together with ``config``.

    Raises:
        TypeError / ValueError: an engine object of the wrong kind, an unknown option, or an
            option's value out of its accepted ones (``EngineConfig``), at construction.
    """

    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        chat_engine_instance: ChatEngine | None = None,
        embedding_engine_instance: EmbeddingEngine | None = None,
        **options: Any,
    ) -> None:
        if config is not None and options:
            raise TypeError(
                f"pass either config or EngineConfig options ({', '.join(sorted(options))}), "
                "not both"
            )
        _check_instance("chat_engine_instance", chat_engine_instance, ChatEngine)
        _check_instance("embedding_engine_instance", embedding_engine_instance, EmbeddingEngine)
        self.config = config or EngineConfig.from_env(**options)
        chat, embedding = chat_engine_instance, embedding_engine_instance
        self._chat = LazyEngine(lambda: chat or self._load_chat_engine())
        self._judge_copy = LazyEngine(self._load_judge_copy)
        self._judge_model = LazyEngine(self._load_judge_model)
        self._embedding = LazyEngine(lambda: embedding or self._load_embedding_engine())
        #: The engines this backend loads, and so closes (injected ones are the caller's).
        self._owned = [self._judge_copy, self._judge_model]
        self._owned += [self._chat] if chat is None else []
        self._owned += [self._embedding] if embedding is None else []
        self._chat_service = Lazy(self._build_chat_service)
        self._judge_reader = Lazy(self._choose_judge_reader)
        self._groundedness_service = Lazy(self._build_groundedness_service)
        self._embedding_service = Lazy(self._build_embedding_service)

    # ------------------------------------------------------------------ engines

    def _load_chat_engine(self) -> ChatEngine:
        from backend.engines.loader import load_chat_engine

        config = self.config
        kind = chat_engine_kind(config.chat_model, config.chat_engine, config.device)
        return load_chat_engine(config.chat_model, kind, config.device, config.chat_dtype)

    def _load_judge_copy(self) -> ChatEngine:
        from backend.engines.loader import load_judge_copy

        return load_judge_copy(self.config.chat_model, self.config.chat_dtype)

    def _load_judge_model(self) -> ChatEngine | FactChecker:
        from backend.engines.loader import load_judge_model

        config = self.config
        kind = chat_engine_kind(config.judge_model, "auto", config.device)
        return load_judge_model(config.judge_model, kind, config.device, config.chat_dtype)

    def _load_embedding_engine(self) -> EmbeddingEngine:
        from backend.engines.loader import load_embedding_engine

        config = self.config
        return load_embedding_engine(config.embedding_model, config.device, config.embedding_dtype)

    # ------------------------------------------------------------------ the services

    def _build_chat_service(self) -> ChatService:
        config = self.config
        chat = self._chat.get()
        # The chain-state reading was trained on the profile's own model, read by an engine
        # that exposes its hidden states; any other model keeps the share alone.
        own_model = config.chat_model == PROFILE_CHAT_MODELS[config.profile]
        shares = config.call_after_results_from is not None
        reads = own_model and chat.reads_hidden_states and shares
        return ChatService(
            chat,
            self._chat.turn,
            config.tool_call_check_below,
            config.call_after_results_from,
            chain_state_reading_for(config.profile) if reads else None,
        )

    def _choose_judge_reader(self) -> JudgeReader:
        """The one place that decides what reads the judge's prompts: the chat engine, or a
        copy of the model that evaluates prompts faster
        (``backend.engines.selection.judge_reads_with_copy``), or the judge model the user
        named (``EngineConfig.judge_model``: a chat model, or a fact-checker). The
        calibration, and the lock held while reading, follow from the choice."""
        config = self.config
        if config.judge_model is not None and config.judge_model != config.chat_model:
            return JudgeReader(self._judge_model.get(), self._judge_model.turn, "judge model")
        chat = self._chat.get()
        if judge_reads_with_copy(config.groundedness_engine, config.chat_model, chat):
            return JudgeReader(self._judge_copy.get(), self._judge_copy.turn, "bf16 copy")
        return JudgeReader(chat, self._chat.turn)

    def _build_groundedness_service(self) -> GroundednessService:
        config, reader = self.config, self._judge_reader.get()
        if reader.kind == "checker":  # a fact-checker: its authors' cut, or the user's
            calibration = checker_thresholds(config.grounded_at, config.not_grounded_below)
        elif config.judge_profile is None:  # a chat model of the user's own: their thresholds
            calibration = own_thresholds(config.grounded_at, config.not_grounded_below)
        else:
            calibration = calibration_for(
                config.judge_profile,
                reader.kind,
                config.grounded_at,
                config.not_grounded_below,
                reads_hidden_states=reader.reads_hidden_states,
            )
        return GroundednessService(reader, calibration)

    def _build_embedding_service(self) -> EmbeddingService:
        return EmbeddingService(self._embedding.get(), self.config.prefixes)

    def judge_reader(self) -> JudgeReader:
        """What reads the groundedness judge's prompts (loaded now); ``describe()`` says it in
        words, e.g. ``llama.cpp (chat engine)``, the default on every CPU."""
        return self._judge_reader.get()

    def judge_calibration(self) -> JudgeCalibration:
        """How the judge reads and decides: calibrated for the profile and the reader, with
        the configured thresholds in place of the calibrated ones (loads the reader)."""
        return self._groundedness_service.get().calibration

    # ------------------------------------------------------------------ lifecycle

    def warmup(self) -> None:
        """Load the models now instead of on the first request."""
        for service in (self._chat_service, self._groundedness_service, self._embedding_service):
            service.get()

    @property
    def ready(self) -> bool:
        return self._chat.loaded and self._embedding.loaded

    def close(self) -> None:
        """Free the models this backend loaded (the llama.cpp context and its runner thread);
        engines passed in belong to the caller."""
        owned, self._owned = self._owned, []  # closing twice frees nothing twice
        for engine in owned:
            if engine.loaded:
                engine.get().close()

    # ------------------------------------------------------------------ answering

    def _chat_answer(
        self, request: ChatCompletionRequest, card: ModelCard, streamed: bool
    ) -> PreparedAnswer:
        return self._chat_service.get().prepare(request, card)

    def _groundedness(self) -> GroundednessService:
        return self._groundedness_service.get()

    def _embeddings(self) -> EmbeddingService:
        return self._embedding_service.get()

    def tokenize(self, text: str) -> list[int]:
        """The chat model's token ids for ``text`` (loads the chat model)."""
        tokenizer = self._chat_service.get().engine.tokenizer
        return list(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    def count_prompt_tokens(self, request: ChatRequestLike) -> int:
        """The prompt tokens a chat request is charged, rendered as ``chat`` renders it."""
        req = parse_request(ChatCompletionRequest, request)
        return len(self._chat_service.get().render(req).ids)
