"""A backend that answers from the service's rooms in this process: chat, the groundedness
check and embeddings, each a service object, whatever runs the models behind them.

The in-process backend's services run local engines; the engine backend's run an
OpenAI-compatible engine (``backend.backends.remote_engine``). Both answer alike from here: a
request validated, its model resolved in the catalogue, and the answer completed or streamed
through ``backend.chat.responses``, sync or async.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from typing import Any

from backend.backends.local.threads import iterate_in_thread, run_in_thread
from backend.chat.responses import PreparedAnswer, complete, stream
from backend.embeddings.service import EmbeddingService
from backend.groundedness.report import report_body
from backend.groundedness.request import groundedness_request
from backend.groundedness.service import GroundednessService
from backend.interface import (
    AsyncChatStream,
    Backend,
    ChatRequestLike,
    ChatStream,
    EmbeddingRequestLike,
    GroundednessResult,
    ReportRequestLike,
)
from backend.protocol.catalogue import GROUNDEDNESS_MODEL, ModelCard, Operation, resolve_model
from backend.protocol.errors import BadRequestError
from backend.protocol.groundedness_report import GroundednessReport, GroundednessReportRequest
from backend.protocol.schemas import (
    ChatCompletion,
    ChatCompletionRequest,
    EmbeddingList,
    EmbeddingRequest,
)
from backend.protocol.validation import parse_request


def _check_core_report(request: ChatCompletionRequest, card: ModelCard, streamed: bool) -> None:
    """``core_report`` (not in the spec) asks a groundedness check, not streamed, for its
    report; anywhere else it is refused rather than ignored."""
    if not request.core_report:
        return
    if card.operation is not Operation.GROUNDEDNESS:
        raise BadRequestError(
            "invalid request: core_report is for the groundedness check "
            f"({GROUNDEDNESS_MODEL}), not for chat models"
        )
    if streamed:
        raise BadRequestError(
            "invalid request: core_report is not available with stream; ask without stream, "
            "or POST /v1/core/groundedness/report"
        )


class ServicesBackend(Backend):
    """``Backend`` over a chat answerer, a groundedness service and an embedding service."""

    @abc.abstractmethod
    def _chat_answer(
        self, request: ChatCompletionRequest, card: ModelCard, streamed: bool
    ) -> PreparedAnswer:
        """The prepared answer to a validated chat request (errors raise here)."""

    @abc.abstractmethod
    def _groundedness(self) -> GroundednessService: ...

    @abc.abstractmethod
    def _embeddings(self) -> EmbeddingService: ...

    def _prepare_chat(self, request: ChatRequestLike, streamed: bool) -> PreparedAnswer:
        req = parse_request(ChatCompletionRequest, request)
        card = resolve_model(req.model, Operation.CHAT, Operation.GROUNDEDNESS)
        _check_core_report(req, card, streamed)
        if card.operation is Operation.GROUNDEDNESS:
            return self._groundedness().prepare(req, card)
        return self._chat_answer(req, card, streamed)

    def chat(self, request: ChatRequestLike) -> ChatCompletion:
        return complete(self._prepare_chat(request, streamed=False))

    def stream_chat(self, request: ChatRequestLike) -> ChatStream:
        return ChatStream(stream(self._prepare_chat(request, streamed=True)))

    async def achat(self, request: ChatRequestLike) -> ChatCompletion:
        return await run_in_thread(self.chat, request)

    async def astream_chat(self, request: ChatRequestLike) -> AsyncChatStream:
        prepared = await run_in_thread(self._prepare_chat, request, True)
        stop = threading.Event()
        return AsyncChatStream(iterate_in_thread(lambda: stream(prepared, stop.is_set), stop))

    def check_groundedness(
        self, context: str | Sequence[str], response: str, **fields: Any
    ) -> GroundednessResult:
        """The verdict, with the judge's support (see ``Backend.check_groundedness``)."""
        req = parse_request(
            ChatCompletionRequest, groundedness_request(context, response, **fields)
        )
        resolve_model(req.model, Operation.GROUNDEDNESS)
        verdict, assessment = self._groundedness().judge_request(req)
        return GroundednessResult(verdict, assessment.support)

    async def acheck_groundedness(
        self, context: str | Sequence[str], response: str, **fields: Any
    ) -> GroundednessResult:
        return await run_in_thread(lambda: self.check_groundedness(context, response, **fields))

    def groundedness_report(self, request: ReportRequestLike) -> GroundednessReport:
        """The report, from the judge's readings of the check (see ``Backend``)."""
        req = parse_request(GroundednessReportRequest, request)
        card = resolve_model(req.model, Operation.GROUNDEDNESS)
        check = parse_request(
            ChatCompletionRequest,
            groundedness_request(req.context_text, req.response, model=req.model),
        )
        return report_body(self._groundedness().report_request(check), card.version)

    async def agroundedness_report(self, request: ReportRequestLike) -> GroundednessReport:
        return await run_in_thread(self.groundedness_report, request)

    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        req = parse_request(EmbeddingRequest, request)
        card = resolve_model(req.model, Operation.EMBEDDINGS)
        return self._embeddings().embed(req, card)

    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return await run_in_thread(self.embed, request)
