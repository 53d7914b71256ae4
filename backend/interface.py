"""The one interface every front-end uses: the in-process backend and the HTTP client both
implement ``Backend``; the server, the CLI, the bulk runner and the LangChain / LlamaIndex
adapters sit on it."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backend.groundedness.request import groundedness_request, read_verdict
from backend.protocol.catalogue import (
    GROUNDEDNESS_MODEL,
    Operation,
    model_list,
    resolve_model,
    serving_card,
)
from backend.protocol.errors import InternalServerError, NotImplementedByBackendError
from backend.protocol.groundedness_report import (
    ChatCompletionWithReport,
    GroundednessReport,
    GroundednessReportRequest,
)
from backend.protocol.schemas import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    EmbeddingList,
    EmbeddingRequest,
    ModelList,
    Verdict,
)
from backend.protocol.tokenize import COUNTED_CHAT_FIELDS, TokenizeRequest, TokenizeResponse
from backend.protocol.validation import parse_request

ChatRequestLike = ChatCompletionRequest | Mapping[str, Any]
EmbeddingRequestLike = EmbeddingRequest | Mapping[str, Any]
ReportRequestLike = GroundednessReportRequest | Mapping[str, Any]


@dataclass(frozen=True)
class GroundednessResult:
    """A groundedness check's verdict, and the judge's support where it is known."""

    verdict: Verdict
    #: The weakest claim's support in [0, 1] (``backend.groundedness.judge``); None where the
    #: judge runs behind an API that answers with the verdict alone (a core-textmodels server).
    support: float | None = None


class ChatStream(Iterator[ChatCompletionChunk]):
    """The chunks of one streamed chat completion.

    ``close()`` (or leaving a ``with`` block) stops the generation and frees what the stream
    holds (a model's place, a connection); it runs by itself when the stream ends or fails.
    """

    def __init__(
        self,
        chunks: Iterator[ChatCompletionChunk],
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._chunks = chunks
        self._on_close = on_close
        self._closed = False

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> ChatCompletionChunk:
        if self._closed:
            raise StopIteration
        try:
            return next(self._chunks)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            close = getattr(self._chunks, "close", None)  # a generator's, when it is one
            if close is not None:
                close()
        finally:
            if self._on_close is not None:
                self._on_close()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChatStream(AsyncIterator[ChatCompletionChunk]):
    """The async twin of ``ChatStream``: ``aclose()`` stops the generation."""

    def __init__(
        self,
        chunks: AsyncIterator[ChatCompletionChunk],
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._chunks = chunks
        self._on_close = on_close
        self._closed = False

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def __anext__(self) -> ChatCompletionChunk:
        if self._closed:
            raise StopAsyncIteration
        try:
            return await anext(self._chunks)
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            aclose = getattr(self._chunks, "aclose", None)  # an async generator's
            if aclose is not None:
                await aclose()
        finally:
            if self._on_close is not None:
                await self._on_close()

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Backend(abc.ABC):
    """Chat (and groundedness), streaming chat and embeddings, sync and async.

    A request is a request model or the JSON-shaped dict the HTTP API takes; results are the
    response models. Failures raise ``backend.protocol.errors.CoreError`` subclasses carrying
    the HTTP status and the spec's error object. ``stream`` in a request is ignored: the
    method decides.
    """

    @abc.abstractmethod
    def chat(self, request: ChatRequestLike) -> ChatCompletion: ...

    @abc.abstractmethod
    def stream_chat(self, request: ChatRequestLike) -> ChatStream:
        """Validate the request at once (errors raise here), then return the stream."""

    @abc.abstractmethod
    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList: ...

    @abc.abstractmethod
    async def achat(self, request: ChatRequestLike) -> ChatCompletion: ...

    @abc.abstractmethod
    async def astream_chat(self, request: ChatRequestLike) -> AsyncChatStream:
        """Validate the request (errors raise when awaited), then return the stream."""

    @abc.abstractmethod
    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList: ...

    def check_groundedness(
        self, context: str | Sequence[str], response: str, **fields: Any
    ) -> GroundednessResult:
        """Is ``response`` grounded in ``context`` (a text, or retrieved texts)? The verdict of
        a check request (spec 4.2; ``fields`` are added to it), with the judge's support where
        this backend runs the judge itself.

        Raises:
            BadRequestError: an empty context or response, or a bad field.
        """
        return GroundednessResult(
            read_verdict(self.chat(groundedness_request(context, response, **fields)))
        )

    async def acheck_groundedness(
        self, context: str | Sequence[str], response: str, **fields: Any
    ) -> GroundednessResult:
        """The async twin of ``check_groundedness``."""
        completion = await self.achat(groundedness_request(context, response, **fields))
        return GroundednessResult(read_verdict(completion))

    def check_groundedness_report(
        self, context: str | Sequence[str], response: str, *, model: str = GROUNDEDNESS_MODEL
    ) -> GroundednessReport:
        """The check's report (``backend.protocol.groundedness_report``): its verdict (the
        same as ``check_groundedness``'s), its support, each claim where it lies in
        ``response`` with its verdict, support and the context chunks it was read against,
        and the response without the claims the context does not support. Offsets are
        Python ``str`` indices; a list of contexts counts as its texts joined by a blank line.

        Raises:
            BadRequestError: an empty context or response.
        """
        return self.groundedness_report(
            {"model": model, "context": _texts(context), "response": response}
        )

    async def acheck_groundedness_report(
        self, context: str | Sequence[str], response: str, *, model: str = GROUNDEDNESS_MODEL
    ) -> GroundednessReport:
        """The async twin of ``check_groundedness_report``."""
        return await self.agroundedness_report(
            {"model": model, "context": _texts(context), "response": response}
        )

    def groundedness_report(self, request: ReportRequestLike) -> GroundednessReport:
        """What ``POST /v1/core/groundedness/report`` answers for ``request``. This default
        asks ``chat`` for a check with ``core_report`` (a backend that answers checks
        itself); the HTTP client asks the route."""
        req = parse_request(GroundednessReportRequest, request)
        return _report_of(self.chat(_report_check(req)))

    async def agroundedness_report(self, request: ReportRequestLike) -> GroundednessReport:
        """The async twin of ``groundedness_report``."""
        req = parse_request(GroundednessReportRequest, request)
        return _report_of(await self.achat(_report_check(req)))

    def models(self) -> ModelList:
        """The model catalogue (spec 2.1) in OpenAI's list shape."""
        return model_list()

    def warmup(self) -> None:
        """Get ready to answer now (load the models) rather than on the first request."""

    def tokenize(self, text: str) -> list[int]:
        """The chat model's token ids for ``text``, without special tokens.

        Raises:
            NotImplementedError: the chat model's tokenizer is not in this process.
        """
        raise NotImplementedError(f"{type(self).__name__} has no local chat tokenizer")

    def count_prompt_tokens(self, request: ChatRequestLike) -> int:
        """The prompt tokens a chat request would be charged: its messages and tools rendered
        exactly as the model reads them. The rules that span messages are not checked, so a
        part of a conversation (one being trimmed to fit) can be counted too.

        Raises:
            NotImplementedError: the chat model's tokenizer is not in this process.
            BadRequestError: the body does not fit the request schema.
        """
        raise NotImplementedError(f"{type(self).__name__} has no local chat tokenizer")

    def count_tokens(self, request: TokenizeRequest | Mapping[str, Any]) -> TokenizeResponse:
        """What ``POST /v1/core/tokenize`` answers: a chat request's prompt tokens (its
        messages, tools and response format, as the model reads them) or a text's.

        Raises:
            BadRequestError / NotFoundError: a bad body, or not a chat model.
            NotImplementedByBackendError: the chat model's tokenizer is not in this process.
        """
        req = parse_request(TokenizeRequest, request)
        card = serving_card(resolve_model(req.model, Operation.CHAT))
        try:
            if req.input is not None:
                tokens = self.tokenize(req.input)
                count = len(tokens)
            else:
                chat = req.model_dump(
                    mode="json", exclude_none=True, include=set(COUNTED_CHAT_FIELDS)
                )
                tokens, count = None, self.count_prompt_tokens({"model": req.model, **chat})
        except NotImplementedError as exc:
            raise NotImplementedByBackendError(
                f"counting tokens needs the chat model's tokenizer, which {type(self).__name__} "
                "does not hold; ask the engine that runs the model"
            ) from exc
        return TokenizeResponse(
            model=card.version, count=count, max_model_len=card.context_length, tokens=tokens
        )

    def close(self) -> None:
        """Release connections or models; the backend is unusable afterwards."""

    async def aclose(self) -> None:
        self.close()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Backend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _texts(context: str | Sequence[str]) -> str | list[str]:
    return context if isinstance(context, str) else list(context)


def _report_check(request: GroundednessReportRequest) -> dict[str, Any]:
    """The spec check asking for ``request``'s report (``core_report``)."""
    return groundedness_request(
        request.context_text, request.response, model=request.model, core_report=True
    )


def _report_of(completion: ChatCompletion) -> GroundednessReport:
    if not isinstance(completion, ChatCompletionWithReport):
        raise InternalServerError("the groundedness check answered without its report")
    return completion.core_report


class BackendProxy(Backend):
    """A backend that hands every call to ``inner``; subclasses change what they need."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    def chat(self, request: ChatRequestLike) -> ChatCompletion:
        return self.inner.chat(request)

    def stream_chat(self, request: ChatRequestLike) -> ChatStream:
        return self.inner.stream_chat(request)

    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return self.inner.embed(request)

    async def achat(self, request: ChatRequestLike) -> ChatCompletion:
        return await self.inner.achat(request)

    async def astream_chat(self, request: ChatRequestLike) -> AsyncChatStream:
        return await self.inner.astream_chat(request)

    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return await self.inner.aembed(request)

    def check_groundedness(
        self, context: str | Sequence[str], response: str, **fields: Any
    ) -> GroundednessResult:
        return self.inner.check_groundedness(context, response, **fields)

    async def acheck_groundedness(
        self, context: str | Sequence[str], response: str, **fields: Any
    ) -> GroundednessResult:
        return await self.inner.acheck_groundedness(context, response, **fields)

    def groundedness_report(self, request: ReportRequestLike) -> GroundednessReport:
        return self.inner.groundedness_report(request)

    async def agroundedness_report(self, request: ReportRequestLike) -> GroundednessReport:
        return await self.inner.agroundedness_report(request)

    def models(self) -> ModelList:
        return self.inner.models()

    def warmup(self) -> None:
        self.inner.warmup()

    def tokenize(self, text: str) -> list[int]:
        return self.inner.tokenize(text)

    def count_prompt_tokens(self, request: ChatRequestLike) -> int:
        return self.inner.count_prompt_tokens(request)
