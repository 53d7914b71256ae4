"""The endpoints: thin front-ends over the ``Backend``.

Bodies are validated by ``backend.protocol.validation.parse_request``, the same function the
in-process backend uses, so every client sees the same 400 messages; the OpenAPI document
still describes the request models (see ``app.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from backend.protocol.errors import BadRequestError
from backend.protocol.groundedness_report import GroundednessReport, GroundednessReportRequest
from backend.protocol.schemas import (
    ChatCompletion,
    ChatCompletionRequest,
    EmbeddingList,
    EmbeddingRequest,
    ErrorResponse,
    ModelList,
    StreamOptions,
)
from backend.protocol.tokenize import TokenizeRequest, TokenizeResponse
from backend.protocol.validation import parse_request
from backend.server.context import ServerContext
from backend.server.json_body import parse_json_body
from backend.server.streaming import EventStreamResponse, chunk_events

if TYPE_CHECKING:
    from backend.interface import Backend

API_PREFIX = "/v1/core"
RequestT = TypeVar("RequestT", bound=BaseModel)
ResultT = TypeVar("ResultT")


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    reasons = {
        400: "Invalid request (the message says what to fix).",
        401: "Missing, malformed or wrong API key.",
        404: "Unknown model or path.",
        413: "Request body over the server's limit.",
        429: "Every model place is taken and the queue is full; see Retry-After.",
        500: "Internal error; the message names the request id it was logged under.",
        501: "This server's backend cannot do it (counting without the model's tokenizer).",
        503: "Models loading or server shutting down; see Retry-After.",
        504: "The request ran past the server's request timeout.",
    }
    return {s: {"model": ErrorResponse, "description": reasons[s]} for s in statuses}


def _json_body(model: type[Any]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    }


_MODEL_ERRORS = _errors(400, 401, 404, 413, 429, 500, 503, 504)

router = APIRouter()


def _context(request: Request) -> ServerContext:
    return request.app.state.core


async def _read_json(request: Request) -> Any:
    return parse_json_body(await request.body())


async def _run_on_body(
    request: Request,
    model: type[RequestT],
    call: Callable[[Backend, RequestT], Awaitable[ResultT]],
) -> tuple[ServerContext, ResultT]:
    """The body validated as ``model``, then ``call`` run on it and the backend within the
    request's deadline and model places: the steps of an endpoint answering one object."""
    context = _context(request)
    deadline = context.deadline()
    body = parse_request(model, await _read_json(request))
    backend = context.backend
    result = await context.run_model(lambda: call(backend, body), deadline)
    return context, result


async def _answer_counting_prompt_tokens(
    request: Request,
    model: type[RequestT],
    call: Callable[[Backend, RequestT], Awaitable[EmbeddingList | GroundednessReport]],
) -> Response:
    """``_run_on_body``'s result as the JSON answer, its prompt tokens counted in the
    metrics: the steps of an endpoint whose models generate no tokens."""
    context, result = await _run_on_body(request, model, call)
    context.metrics.count_tokens(result.model, result.usage.prompt_tokens)
    return Response(result.model_dump_json(), media_type="application/json")


def _check_message_count(body: Any, max_messages: int) -> None:
    """The operator's cap on messages, checked before validating each of them."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if isinstance(messages, list) and len(messages) > max_messages:
        raise BadRequestError(
            f"invalid request: messages holds {len(messages)} messages; this server accepts "
            f"at most {max_messages} per request"
        )


# Each server-sent event described as OpenAPI 3.2 does (``itemSchema``): an event whose
# ``data`` is a JSON chunk, or ``[DONE]`` last. Describing the event by the chunk's schema
# itself, as before, made validators read the event object ``{"data": ..., "event": ...}``
# as a chunk and fail every streamed 200.
_CHAT_200 = {
    "description": "A chat completion, or with ``stream: true`` server-sent chunk events "
    "(``data: {chunk}`` each, then ``data: [DONE]``).",
    "content": {
        "text/event-stream": {
            "itemSchema": {
                "type": "object",
                "required": ["data"],
                "oneOf": [
                    {"properties": {"data": {"const": "[DONE]"}}},  # the last event
                    {
                        "properties": {
                            "data": {
                                "type": "string",
                                "not": {"const": "[DONE]"},
                                "contentMediaType": "application/json",
                                "contentSchema": {
                                    "$ref": "#/components/schemas/ChatCompletionChunk"
                                },
                            }
                        }
                    },
                ],
            }
        }
    },
}


@router.post(
    f"{API_PREFIX}/chat/completions",
    response_model=ChatCompletion,
    responses={200: _CHAT_200, **_MODEL_ERRORS},
    openapi_extra=_json_body(ChatCompletionRequest),
    summary="Chat completion or groundedness check (by model name)",
)
async def chat_completions(request: Request) -> Response:
    context = _context(request)
    started, deadline = time.perf_counter(), context.deadline()
    body = await _read_json(request)
    _check_message_count(body, context.settings.max_messages)
    chat_request = parse_request(ChatCompletionRequest, body)
    backend = context.backend
    if not chat_request.stream:
        completion = await context.run_model(lambda: backend.achat(chat_request), deadline)
        context.metrics.count_tokens(
            completion.model, completion.usage.prompt_tokens, completion.usage.completion_tokens
        )
        return Response(completion.model_dump_json(), media_type="application/json")

    # The usage chunk is always requested, to count tokens; it is dropped unless asked for.
    counted = chat_request.model_copy(update={"stream_options": StreamOptions(include_usage=True)})
    context.streams.take()
    try:
        # Validation errors raise here, before the response starts, as plain 4xx responses.
        chunks = await context.run_model(
            lambda: backend.astream_chat(counted), deadline, keep_place=True
        )
    except BaseException:
        context.streams.give_back()
        raise
    events = chunk_events(
        chunks,
        scope=request.scope,
        metrics=context.metrics,
        keep_alive_interval=context.settings.keep_alive_interval,
        deadline=deadline,
        send_usage=chat_request.include_usage,
        started=started,
    )

    def close() -> None:
        context.limiter.release()
        context.streams.give_back()

    return EventStreamResponse(events, on_close=close)


@router.post(
    f"{API_PREFIX}/embeddings",
    response_model=EmbeddingList,
    responses=_MODEL_ERRORS,
    openapi_extra=_json_body(EmbeddingRequest),
    summary="Embed one string or up to 100 strings",
)
async def embeddings(request: Request) -> Response:
    return await _answer_counting_prompt_tokens(
        request, EmbeddingRequest, lambda backend, body: backend.aembed(body)
    )


@router.post(
    f"{API_PREFIX}/tokenize",
    response_model=TokenizeResponse,
    responses={**_MODEL_ERRORS, **_errors(501)},
    openapi_extra=_json_body(TokenizeRequest),
    summary="Count a chat request's prompt tokens, or a text's (vLLM's shape)",
)
async def tokenize(request: Request) -> Response:
    _, result = await _run_on_body(
        request,
        TokenizeRequest,
        lambda backend, body: asyncio.to_thread(backend.count_tokens, body),
    )
    return Response(result.model_dump_json(exclude_none=True), media_type="application/json")


@router.post(
    f"{API_PREFIX}/groundedness/report",
    response_model=GroundednessReport,
    responses=_MODEL_ERRORS,
    openapi_extra=_json_body(GroundednessReportRequest),
    summary="A groundedness check's report: verdict, support, claims with their evidence",
)
async def groundedness_report(request: Request) -> Response:
    return await _answer_counting_prompt_tokens(
        request,
        GroundednessReportRequest,
        lambda backend, body: backend.agroundedness_report(body),
    )


@router.get(
    f"{API_PREFIX}/models",
    response_model=ModelList,
    responses=_errors(401, 500),
    summary="The model catalogue",
)
def list_models(request: Request) -> ModelList:
    return _context(request).backend.models()


class Health(BaseModel):
    status: Literal["ok"] = Field(description="Always ok while the process answers.")
    ready: bool = Field(description="Models loaded and not shutting down.")


@router.get("/health", response_model=Health, summary="Liveness (200) and readiness (ready)")
def health(request: Request) -> Health:
    return Health(status="ok", ready=_context(request).lifecycle.ready)


class Ready(BaseModel):
    status: Literal["ready"] = Field(description="Models loaded and not shutting down.")


@router.get(
    "/ready",
    response_model=Ready,
    responses=_errors(503),
    summary="Readiness: 200 when model requests are served, else 503 with Retry-After",
)
def ready(request: Request) -> Ready:
    # For load balancers: the same rule as model requests, so a 200 here means they are served.
    _context(request).lifecycle.check_accepting()
    return Ready(status="ready")


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request) -> Response:
    registry = _context(request).metrics
    return Response(registry.render(), media_type=registry.content_type)
