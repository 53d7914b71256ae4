"""The engine backend: the whole service in front of OpenAI-compatible engines.

Chat goes to the chat engine (``backend.backends.remote_engine.chat``); embeddings to the embedding
engine, behind the service's prefixes and windowing (``backend.backends.remote_engine.embeddings``);
the groundedness check runs its judge here, reading P(yes) from the chat engine's logprobs
(``backend.backends.remote_engine.judge_reading``). Thresholds calibrated for one model are never
applied to another: the check answers only once it is told which hold for the engine's model.
"""

from __future__ import annotations

import logging
from typing import Any

from backend.backends.client.transport import RetryingTransport
from backend.backends.local.services import ServicesBackend
from backend.backends.local.threads import Lazy
from backend.backends.remote_engine.api import EngineAPI
from backend.backends.remote_engine.chat import EngineChatService
from backend.backends.remote_engine.embeddings import EngineEmbeddingEngine
from backend.backends.remote_engine.judge_reading import EngineYesNoReading, embedded_chat_tokenizer
from backend.backends.remote_engine.settings import EngineSettings, engine_root_url
from backend.backends.remote_engine.tokenizers import resolve_window_tokenizer
from backend.chat.responses import PreparedAnswer
from backend.embeddings.service import EmbeddingService
from backend.groundedness.calibration import (
    JudgeCalibration,
    calibration_for,
    own_thresholds,
)
from backend.groundedness.service import GroundednessService, JudgeReader
from backend.protocol.catalogue import ModelCard
from backend.protocol.errors import ServiceUnavailableError
from backend.protocol.schemas import ChatCompletionRequest

logger = logging.getLogger(__name__)

UNCALIBRATED = (
    "the groundedness check is not calibrated for the engine's model '{model}': its "
    "thresholds hold only for the model they were fitted on. Pass grounded_at and "
    "not_grounded_below (CLI: --grounded-at/--not-grounded-below), or judge_calibration='small' "
    "or 'default' if the engine serves those embedded weights, or calibrate against the engine: "
    "python -m benchmarks.eval.calibrate --engine-url {url} --engine-chat-model {model}"
)


def engine_calibration(settings: EngineSettings, model: str) -> JudgeCalibration | None:
    """The thresholds for the engine's model: a reused calibration of the same weights (read
    by llama.cpp: engines serving the GGUF; another reader's thresholds differ a little),
    with the user's thresholds in its place where given; None until one of them is."""
    if settings.judge_calibration is not None:
        return calibration_for(
            settings.judge_calibration,
            "llama.cpp",
            settings.grounded_at,
            settings.not_grounded_below,
            reads_hidden_states=False,  # an engine behind an API returns logprobs only
        )
    if settings.grounded_at is None and settings.not_grounded_below is None:
        return None
    return own_thresholds(settings.grounded_at, settings.not_grounded_below)


class EngineBackend(ServicesBackend):
    """The service answered by OpenAI-compatible engines: ``backend.connect(engine_url=...)``.

    Args:
        settings: where the engines are (default: from ``CORE_ENGINE_*``).
        **options: ``EngineSettings`` fields overriding the environment.
    """

    def __init__(self, settings: EngineSettings | None = None, **options: Any) -> None:
        self.settings = settings or EngineSettings.from_env(**options)
        s = self.settings
        self._chat_api = EngineAPI(s.engine_url, s.engine_api_key, s.timeout, s.max_retries)
        self._embedding_api = (
            self._chat_api
            if s.embeddings_url == s.engine_url
            else EngineAPI(s.embeddings_url, s.engine_api_key, s.timeout, s.max_retries)  # type: ignore[arg-type]
        )
        #: The embedding engine's tokenize endpoints, outside ``/v1``; asked only when needed.
        self._tokenize_transport = RetryingTransport(
            engine_root_url(s.embeddings_url),  # type: ignore[arg-type]
            s.engine_api_key,
            s.timeout,
            max_retries=s.max_retries,
        )
        self._chat_model = Lazy(lambda: s.chat_model or self._chat_api.only_model("chat model"))
        self._embedding_model = Lazy(
            lambda: s.embedding_model or self._embedding_api.only_model("embedding model")
        )
        self._chat_service = EngineChatService(self._chat_api, self._chat_model.get)
        self._groundedness_service = Lazy(self._build_groundedness_service)
        self._embedding_service = Lazy(self._build_embedding_service)

    def __repr__(self) -> str:  # never shows the key
        s = self.settings
        return f"EngineBackend(engine_url={s.engine_url!r}, embeddings_url={s.embeddings_url!r})"

    def _build_groundedness_service(self) -> GroundednessService:
        model = self._chat_model.get()
        calibration = engine_calibration(self.settings, model)
        if calibration is None:
            url = self.settings.engine_url.removesuffix("/v1")
            raise ServiceUnavailableError(UNCALIBRATED.format(model=model, url=url))
        tokenizer = embedded_chat_tokenizer(self.settings.judge_calibration or "small")
        reading = EngineYesNoReading(self._chat_api, model, tokenizer)
        return GroundednessService(JudgeReader(reading, source="engine"), calibration)

    def _build_embedding_service(self) -> EmbeddingService:
        model, option = self._embedding_model.get(), self.settings.embedding_tokenizer
        tokenizer = resolve_window_tokenizer(option, model, self._tokenize_transport)
        engine = EngineEmbeddingEngine(self._embedding_api, self._embedding_model.get, tokenizer)
        return EmbeddingService(engine, self.settings.prefixes)

    # ------------------------------------------------------------------ answering

    def _chat_answer(
        self, request: ChatCompletionRequest, card: ModelCard, streamed: bool
    ) -> PreparedAnswer:
        return self._chat_service.prepare(request, card, streamed)

    def _groundedness(self) -> GroundednessService:
        return self._groundedness_service.get()

    def _embeddings(self) -> EmbeddingService:
        return self._embedding_service.get()

    # ------------------------------------------------------------------ lifecycle

    def warmup(self) -> None:
        """Reach both engines now and learn their model ids (a server is ready after this)."""
        self._chat_model.get()
        self._embedding_model.get()
        self._embedding_service.get()

    @property
    def ready(self) -> bool:
        return self._chat_model.loaded and self._embedding_service.loaded

    def close(self) -> None:
        self._chat_api.close()
        self._embedding_api.close()
        self._tokenize_transport.close()
