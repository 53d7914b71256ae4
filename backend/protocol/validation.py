"""Request validation with the spec's error object and messages (spec sections 4, 7 and 8).

Structural checks (types, ranges, role rules of 2.2) live on the pydantic models; this module
turns their failures into ``BadRequestError`` with a message that says what to fix, and adds
the rules that need the whole request or token counts. Every message starts with
``invalid request:`` as the spec's shown messages do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from backend.protocol.errors import BadRequestError
from backend.protocol.limits import (
    MAX_EMBEDDING_INPUTS,
    MAX_TOKENS_PER_EMBEDDING_INPUT,
    MAX_TOKENS_PER_EMBEDDING_REQUEST,
)
from backend.protocol.schemas import ChatCompletionRequest, ChatMessage, EmbeddingRequest

RequestT = TypeVar("RequestT", bound=BaseModel)


def _location(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("function-after[_role_rules()]",) or "[" in str(part):
            continue  # pydantic's validator names, meaningless to a caller
        else:
            path += f".{part}" if path else str(part)
    return path


def _describe(error: Mapping[str, Any]) -> str:
    message = str(error.get("msg", "is invalid"))
    message = message.removeprefix("Value error, ")
    where = _location(error.get("loc", ()))
    return f"{where}: {message}" if where else message


def parse_request(model: type[RequestT], data: RequestT | Mapping[str, Any]) -> RequestT:
    """Validate a request given as its model or as the JSON-shaped dict the HTTP API takes.

    Raises:
        BadRequestError: the body does not fit the schema; the message names the field.
    """
    if isinstance(data, model):
        return data
    if isinstance(data, BaseModel):
        data = data.model_dump(exclude_unset=True)
    if not isinstance(data, Mapping):
        raise BadRequestError(
            f"invalid request: the body must be a JSON object, got {type(data).__name__}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = _describe(errors[0])
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        raise BadRequestError(f"invalid request: {first}{more}") from exc


def check_groundedness_messages(messages: Sequence[ChatMessage]) -> tuple[str, str]:
    """Apply spec 4.2's rules; return (context, response).

    The counts are checked before the contents, user before assistant, with the exact
    messages of spec section 7.
    """
    for role in ("user", "assistant"):
        found = sum(1 for m in messages if m.role == role)
        if found != 1:
            raise BadRequestError(f"invalid request: 1 {role} message expected, found {found}")
    others = sorted({m.role for m in messages} - {"user", "assistant"})
    if others:
        raise BadRequestError(
            "invalid request: a groundedness check takes exactly one user message (the "
            f"context) and one assistant message (the response), found {', '.join(others)}"
        )
    by_role = {m.role: m for m in messages}
    for role in ("user", "assistant"):
        if not by_role[role].content:
            raise BadRequestError(f"invalid request: {role} message content is required")
    return by_role["user"].content or "", by_role["assistant"].content or ""


def check_chat_request(request: ChatCompletionRequest) -> None:
    """Rules of a chat request that span several messages or fields."""
    if not request.messages:
        raise BadRequestError("invalid request: messages must hold at least one message")
    open_calls: set[str] = set()
    seen_ids: set[str] = set()
    for i, message in enumerate(request.messages):
        if message.role in ("user", "system") and message.content is None:
            raise BadRequestError(
                f"invalid request: messages[{i}]: {message.role} message content is required"
            )
        if message.role == "assistant" and message.content is None and not message.tool_calls:
            raise BadRequestError(
                f"invalid request: messages[{i}]: an assistant message needs content or tool_calls"
            )
        for call in message.tool_calls or ():
            if call.id in seen_ids:
                raise BadRequestError(
                    f"invalid request: messages[{i}]: duplicate tool call id '{call.id}'"
                )
            seen_ids.add(call.id)
            open_calls.add(call.id)
        if message.role == "tool":
            if message.tool_call_id not in open_calls:
                raise BadRequestError(
                    f"invalid request: messages[{i}]: tool message answers tool_call_id "
                    f"'{message.tool_call_id}', which no earlier assistant message called"
                )
            open_calls.discard(message.tool_call_id)
    _check_tools(request)
    if request.top_logprobs is not None and not request.logprobs:
        raise BadRequestError("invalid request: top_logprobs needs logprobs set to true")


def _check_tools(request: ChatCompletionRequest) -> None:
    names = [tool.function.name for tool in request.tools or ()]
    if len(set(names)) != len(names):
        raise BadRequestError("invalid request: tools: function names must be unique")
    choice = request.tool_choice
    if choice is None or choice in ("auto", "none"):
        return
    if not names:
        raise BadRequestError(
            "invalid request: tool_choice needs tools; add the function definitions to tools"
        )
    if not isinstance(choice, str) and choice.function.name not in names:
        raise BadRequestError(
            f"invalid request: tool_choice names function '{choice.function.name}', which is "
            f"not among tools ({', '.join(names)})"
        )


def check_context_budget(prompt_tokens: int, max_tokens: int | None, context_length: int) -> int:
    """Return how many tokens may be generated; reject prompts that leave no room.

    Spec 4.1: input tokens plus ``max_tokens`` must not exceed the context length; an unset
    ``max_tokens`` means up to the context length.
    """
    if max_tokens is not None:
        if prompt_tokens + max_tokens > context_length:
            raise BadRequestError(
                f"invalid request: {prompt_tokens} input tokens plus max_tokens {max_tokens} "
                f"exceed the model's context length of {context_length} tokens; lower "
                f"max_tokens to at most {max(context_length - prompt_tokens, 0)} or shorten "
                "the messages"
            )
        return max_tokens
    if prompt_tokens >= context_length:
        raise BadRequestError(
            f"invalid request: the messages take {prompt_tokens} tokens, which leaves no room "
            f"in the model's context length of {context_length} tokens; shorten the messages"
        )
    return context_length - prompt_tokens


def check_embedding_inputs(request: EmbeddingRequest) -> list[str]:
    """Spec 4.3 / 8 limits that need no tokenizer; returns the inputs as a list."""
    inputs = request.inputs
    if not inputs:
        raise BadRequestError("invalid request: input must hold at least one string")
    if len(inputs) > MAX_EMBEDDING_INPUTS:
        raise BadRequestError(
            f"invalid request: input holds {len(inputs)} strings; at most "
            f"{MAX_EMBEDDING_INPUTS} are allowed per request, split it into several requests"
        )
    for i, text in enumerate(inputs):
        if not text:
            where = f"input[{i}]" if isinstance(request.input, list) else "input"
            raise BadRequestError(f"invalid request: {where} is empty; strings must not be empty")
    return inputs


def check_embedding_tokens(token_counts: Sequence[int], single: bool) -> None:
    """Spec 8: at most 4000 tokens per string and fewer than 204,800 in total."""
    for i, count in enumerate(token_counts):
        if count > MAX_TOKENS_PER_EMBEDDING_INPUT:
            where = "input" if single else f"input[{i}]"
            raise BadRequestError(
                f"invalid request: {where} has {count} tokens; at most "
                f"{MAX_TOKENS_PER_EMBEDDING_INPUT} tokens are allowed per string"
            )
    total = sum(token_counts)
    if total >= MAX_TOKENS_PER_EMBEDDING_REQUEST:
        raise BadRequestError(
            f"invalid request: the inputs have {total} tokens in total; a request must stay "
            f"under {MAX_TOKENS_PER_EMBEDDING_REQUEST} tokens, split it into several requests"
        )
