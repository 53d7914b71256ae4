"""The in-process backend: the whole service running on local models (CPU, or GPU if any)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

import numpy as np

from backend.answer_start import start_answer
from backend.batching import CombiningRunner
from backend.catalogue import InputType, ModelCard, Operation, resolve_model, serving_card
from backend.chat_prompt import render_prompt
from backend.chat_responses import fold_completion, stream_chunks
from backend.config import EngineConfig, JudgeCalibration, judge_calibration
from backend.embedding_service import EmbeddingService
from backend.engines.base import ChatEngine, EmbeddingEngine, SamplingParams
from backend.errors import BadRequestError
from backend.groundedness import GroundednessJudge
from backend.interface import Backend, ChatRequestLike, EmbeddingRequestLike
from backend.output_processor import Finished, OutputEvent, OutputProcessor, TextDelta
from backend.schemas import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Embedding,
    EmbeddingList,
    EmbeddingRequest,
    EmbeddingUsage,
    new_completion_id,
    now,
)
from backend.threads import iterate_in_thread
from backend.validation import (
    check_chat_request,
    check_context_budget,
    check_embedding_inputs,
    check_embedding_tokens,
    check_groundedness_messages,
    parse_request,
)

logger = logging.getLogger(__name__)

DEFAULT_TEMPERATURE = 0.7  # spec 4.1
#: Texts from several waiting requests embedded in one run at most (bounds one run's latency).
MAX_COMBINED_EMBEDDING_TEXTS = 256

EngineT = TypeVar("EngineT")


class _LazyEngine(Generic[EngineT]):
    """An engine loaded on first use, and a lock that serialises its use.

    Most engines are not thread-safe: concurrent callers take turns (``turn``). A
    ``thread_safe`` engine (one that batches concurrent requests) is used without the lock.
    """

    def __init__(self, load: Callable[[], EngineT]) -> None:
        self._load = load
        self._engine: EngineT | None = None
        self._load_lock = threading.Lock()
        self.use_lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    def get(self) -> EngineT:
        if self._engine is None:
            with self._load_lock:
                if self._engine is None:
                    self._engine = self._load()
        return self._engine

    def turn(self) -> contextlib.AbstractContextManager:
        """Held while using the engine: its lock, or nothing for a thread-safe engine."""
        if getattr(self.get(), "thread_safe", False):
            return contextlib.nullcontext()
        return self.use_lock


@dataclass
class _PreparedChat:
    """A validated chat request, ready to run: everything but the model work."""

    model: str
    prompt_tokens: int
    include_usage: bool
    run: Callable[[Callable[[], bool]], Iterator[OutputEvent]]


class InProcessBackend(Backend):
    """Runs chat, groundedness and embeddings in this process.

    Args:
        config: which models to run (default: from the environment, see ``EngineConfig``).
        chat_engine / embedding_engine: ready engines to use instead of loading the
            configured ones (tests, or sharing one engine between backends).
        **options: ``EngineConfig`` fields overriding the environment (``profile="small"``,
            ``chat_model="Qwen/Qwen2.5-7B-Instruct"``, ``device="cuda"``...).
    """

    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        chat_engine: ChatEngine | None = None,
        embedding_engine: EmbeddingEngine | None = None,
        **options: Any,
    ) -> None:
        from backend.engines.loader import (
            load_chat_engine,
            load_embedding_engine,
            load_groundedness_engine,
        )

        self.config = config or EngineConfig.from_env(**options)
        self._injected_chat_engine = chat_engine
        self._chat = _LazyEngine(lambda: chat_engine or load_chat_engine(self.config))
        self._embedding = _LazyEngine(
            lambda: embedding_engine or load_embedding_engine(self.config)
        )
        # What reads the groundedness judge's prompts: the chat engine, or a faster copy of
        # the model for prompt evaluation (see ``groundedness_engine_kind``); an injected chat
        # engine does it too.
        self._scorer = _LazyEngine(
            lambda: chat_engine or load_groundedness_engine(self.config, self._chat.get())
        )
        self._judge: GroundednessJudge | None = None
        self._embedder: EmbeddingService | None = None
        # Requests that arrive while the encoder is busy are embedded together, in one run.
        self._embedding_batches = CombiningRunner(
            lambda requests: self._embedding_service().embed_many(requests),
            max_batch_size=MAX_COMBINED_EMBEDDING_TEXTS,
        )

    # ------------------------------------------------------------------ lifecycle

    def warmup(self) -> None:
        """Load the models now instead of on the first request."""
        self._chat.get()
        self._groundedness_judge()
        self._embedding_service()

    @property
    def ready(self) -> bool:
        return self._chat.loaded and self._embedding.loaded

    # ------------------------------------------------------------------ chat

    def _prepare_chat(self, request: ChatRequestLike) -> _PreparedChat:
        req = parse_request(ChatCompletionRequest, request)
        card = resolve_model(req.model, Operation.CHAT, Operation.GROUNDEDNESS)
        if card.operation is Operation.GROUNDEDNESS:
            return self._prepare_groundedness(req, card)
        check_chat_request(req)
        engine = self._chat.get()
        rendered = render_prompt(
            engine.tokenizer,
            req.messages,
            req.tools,
            req.tool_choice,
            constrained=engine.supports_constraints,
        )
        max_new = check_context_budget(
            len(rendered.ids), req.token_limit, min(card.context_length, engine.context_length)
        )
        params = SamplingParams(
            max_new_tokens=max_new,
            temperature=DEFAULT_TEMPERATURE if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            seed=req.seed,
        )

        def run(should_stop: Callable[[], bool]) -> Iterator[OutputEvent]:
            processor: OutputProcessor | None = None

            def stop() -> bool:
                return (processor is not None and processor.stopped) or should_stop()

            with self._chat.turn():
                answer = start_answer(
                    engine, rendered, params, stop, self.config.tool_call_check_below
                )
                processor = OutputProcessor(
                    engine.tokenizer,
                    engine.eos_token_ids,
                    prompt_ids=answer.prompt_ids,
                    stop=req.stop or (),
                    tool_names=rendered.tool_names if answer.tools_offered else frozenset(),
                    prefill=answer.prefill,
                )
                try:
                    for token in answer.tokens:
                        yield from processor.feed(token)
                        if processor.stopped:
                            break
                finally:
                    answer.close()
            yield from processor.finish()

        return _PreparedChat(
            model=card.version,
            prompt_tokens=len(rendered.ids),
            include_usage=req.include_usage,
            run=run,
        )

    def _prepare_groundedness(self, req: ChatCompletionRequest, card: ModelCard) -> _PreparedChat:
        context, response = check_groundedness_messages(req.messages)
        judge = self._groundedness_judge()
        # Every prompt (two or four readings per claim and chunk) is read now, so the usage is
        # known up front; the async paths call this from a worker thread.
        scorer = self._scorer if self._scorer.get() is not self._chat.get() else self._chat
        with scorer.turn():
            judgement = judge.judge(context, response)

        def run(should_stop: Callable[[], bool]) -> Iterator[OutputEvent]:
            yield TextDelta(judgement.verdict)
            yield Finished("stop", 1)

        return _PreparedChat(
            model=card.version,
            prompt_tokens=judgement.prompt_tokens,
            include_usage=req.include_usage,
            run=run,
        )

    def close(self) -> None:
        """Free the chat models this backend loaded (the llama.cpp context and its runner
        thread); engines passed in belong to the caller."""
        loaded = {id(slot.get()): slot.get() for slot in (self._chat, self._scorer) if slot.loaded}
        for engine in loaded.values():
            if engine is not self._injected_chat_engine:
                engine.close()

    def _groundedness_judge(self) -> GroundednessJudge:
        if self._judge is None:
            calibration = self.judge_calibration()
            self._judge = GroundednessJudge(
                self._scorer.get(),
                grounded_at=calibration.grounded_at,
                not_grounded_below=calibration.not_grounded_below,
                contrast=calibration.contrast,
            )
        return self._judge

    def judge_calibration(self) -> JudgeCalibration:
        """How the judge reads: calibrated for the profile and the engine that reads the
        judge's prompts (loaded now), with the configured thresholds in place of the
        calibrated ones."""
        from backend.engines.loader import groundedness_reader

        calibration = judge_calibration(
            self.config.profile, groundedness_reader(self._scorer.get())
        )
        if self.config.grounded_at is not None:
            calibration = replace(calibration, grounded_at=self.config.grounded_at)
        if self.config.not_grounded_below is not None:
            calibration = replace(calibration, not_grounded_below=self.config.not_grounded_below)
        return calibration

    def chat(self, request: ChatRequestLike) -> ChatCompletion:
        prepared = self._prepare_chat(request)
        events = list(prepared.run(lambda: False))
        return fold_completion(
            events,
            completion_id=new_completion_id(),
            created=now(),
            model=prepared.model,
            prompt_tokens=prepared.prompt_tokens,
        )

    def stream_chat(self, request: ChatRequestLike) -> Iterator[ChatCompletionChunk]:
        prepared = self._prepare_chat(request)
        return stream_chunks(
            prepared.run(lambda: False),
            completion_id=new_completion_id(),
            created=now(),
            model=prepared.model,
            prompt_tokens=prepared.prompt_tokens,
            include_usage=prepared.include_usage,
        )

    async def achat(self, request: ChatRequestLike) -> ChatCompletion:
        return await asyncio.to_thread(self.chat, request)

    async def astream_chat(self, request: ChatRequestLike) -> AsyncIterator[ChatCompletionChunk]:
        prepared = await asyncio.to_thread(self._prepare_chat, request)
        stop = threading.Event()

        def chunks() -> Iterator[ChatCompletionChunk]:
            return stream_chunks(
                prepared.run(stop.is_set),
                completion_id=new_completion_id(),
                created=now(),
                model=prepared.model,
                prompt_tokens=prepared.prompt_tokens,
                include_usage=prepared.include_usage,
            )

        return iterate_in_thread(chunks, stop)

    # ------------------------------------------------------------------ embeddings

    def _embedding_service(self) -> EmbeddingService:
        if self._embedder is None:
            self._embedder = EmbeddingService(self._embedding.get(), self.config.prefixes)
        return self._embedder

    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        req = parse_request(EmbeddingRequest, request)
        card = resolve_model(req.model, Operation.EMBEDDINGS)
        serving = serving_card(card)
        if card.deprecated:
            warnings.warn(
                f"model '{card.name}' is deprecated since {card.deprecation_date}; it is served "
                f"by '{serving.name}', switch to that name",
                DeprecationWarning,
                stacklevel=2,
            )
        texts = check_embedding_inputs(req)
        service = self._embedding_service()
        if req.dimensions is not None and req.dimensions != service.engine.dimensions:
            raise BadRequestError(
                f"invalid request: dimensions {req.dimensions} is not available; this model "
                f"produces {service.engine.dimensions}-dimensional vectors",
                param="dimensions",
            )
        tokenized = service.tokenize(texts, serving.input_type or InputType.PASSAGE)
        counts = tokenized.token_counts
        check_embedding_tokens(counts, single=isinstance(req.input, str))
        vectors = self._embedding_batches.submit(tokenized, size=len(texts))
        return EmbeddingList(
            data=[
                Embedding(index=i, embedding=_encode(vector, req.encoding_format))
                for i, vector in enumerate(vectors)
            ],
            model=serving.version,
            usage=EmbeddingUsage(prompt_tokens=sum(counts), total_tokens=sum(counts)),
        )

    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return await asyncio.to_thread(self.embed, request)


def _encode(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":  # OpenAI's convention: little-endian float32 bytes
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.astype(np.float32).tolist()


_SHARED: dict[EngineConfig, InProcessBackend] = {}
_SHARED_LOCK = threading.Lock()


def shared_inprocess_backend(config: EngineConfig | None = None) -> InProcessBackend:
    """The one in-process backend for these engine settings in this process.

    The LangChain and LlamaIndex components (chat, embeddings, groundedness) built with the
    same settings use the same models instead of loading them again. Models load on first use.
    """
    config = config or EngineConfig.from_env()
    with _SHARED_LOCK:
        if config not in _SHARED:
            _SHARED[config] = InProcessBackend(config)
        return _SHARED[config]
