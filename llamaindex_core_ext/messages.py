"""Converting between LlamaIndex's chat types and the service's wire format.

Pure functions, tested offline: LlamaIndex messages to request messages, tools and
``tool_choice`` to their request fields, and the service's assistant message, tool calls and
usage back to LlamaIndex's ``ChatMessage``, ``ToolSelection`` and token counts. The streaming
and non-streaming paths build their messages with the same ``assistant_message``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import (
    CachePoint,
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LogProb,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.llms.llm import ToolSelection

from backend.protocol.schemas import ChatCompletion, FunctionCall, TokenLogprob, ToolCall, Usage

if TYPE_CHECKING:
    from llama_index.core.tools.types import BaseTool

_ROLES: dict[MessageRole, str] = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.CHATBOT: "assistant",  # Cohere's name for the assistant
    MessageRole.MODEL: "assistant",  # Gemini's name for the assistant
    MessageRole.TOOL: "tool",
}

# Blocks that carry nothing the service takes as input: an earlier turn's reasoning trace and
# provider cache hints. Every other non-text block (images, audio, documents...) is refused.
_IGNORED_BLOCKS = (ThinkingBlock, CachePoint)


# ---------------------------------------------------------------- requests


def to_core_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """LlamaIndex messages as the request's ``messages`` (spec 2.2).

    Tool calls come from ``ToolCallBlock``s, or from ``additional_kwargs["tool_calls"]`` in
    messages made by older code. An assistant message holding both text and tool calls becomes
    two messages, the text first, because the spec wants ``content`` null beside ``tool_calls``.

    Raises:
        ValueError: a role or content block the service cannot take (legacy ``function``
            messages, images, audio...), a tool message without ``tool_call_id``, or a tool
            call without an id.
    """
    converted: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        converted.extend(_to_core_message(message, index))
    return converted


def _to_core_message(message: ChatMessage, index: int) -> list[dict[str, Any]]:
    role = _ROLES.get(message.role)
    if role is None:
        raise ValueError(
            f"messages[{index}]: role '{message.role.value}' is not supported; use "
            "'tool' messages (with additional_kwargs['tool_call_id']) for tool results"
        )
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            calls.append(_tool_call_from_block(block, index))
        elif not isinstance(block, _IGNORED_BLOCKS):
            raise ValueError(
                f"messages[{index}]: {type(block).__name__} content is not supported; the "
                "service's chat models take text only"
            )
    if not calls and role == "assistant":
        calls = _legacy_tool_calls(message.additional_kwargs, index)
    # ChatMessage.content joins text blocks the same way.
    content = "\n".join(texts)

    if role == "tool":
        tool_call_id = message.additional_kwargs.get("tool_call_id")
        if not tool_call_id:
            raise ValueError(
                f"messages[{index}]: a tool message needs additional_kwargs['tool_call_id'], "
                "the id of the call it answers"
            )
        return [{"role": "tool", "content": content, "tool_call_id": str(tool_call_id)}]
    if calls:
        if role != "assistant":
            raise ValueError(f"messages[{index}]: only assistant messages may hold tool calls")
        call_message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [call.model_dump() for call in calls],
        }
        text_message = [{"role": "assistant", "content": content}] if content else []
        return [*text_message, call_message]
    return [{"role": role, "content": content}]


def _tool_call_from_block(block: ToolCallBlock, index: int) -> ToolCall:
    if not block.tool_call_id:
        raise ValueError(
            f"messages[{index}]: tool call '{block.tool_name}' has no tool_call_id; the tool "
            "message answering it must name that id"
        )
    arguments = block.tool_kwargs
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(
        id=block.tool_call_id, function=FunctionCall(name=block.tool_name, arguments=arguments)
    )


def _legacy_tool_calls(additional_kwargs: Mapping[str, Any], index: int) -> list[ToolCall]:
    calls = []
    for call in additional_kwargs.get("tool_calls") or ():
        data = call.model_dump() if hasattr(call, "model_dump") else call
        try:
            calls.append(ToolCall.model_validate(data))
        except ValueError as exc:
            raise ValueError(
                f"messages[{index}]: invalid tool call in additional_kwargs: {exc}"
            ) from exc
    return calls


def to_core_tool(tool: BaseTool) -> dict[str, Any]:
    """A LlamaIndex tool as a tool definition (spec 2.4)."""
    # skip_length_check: the 1024-character cap on descriptions is OpenAI's, not the spec's.
    return tool.metadata.to_openai_tool(skip_length_check=True)


def resolve_tool_choice(
    tool_choice: str | Mapping[str, Any] | None, tool_required: bool
) -> str | dict[str, Any]:
    """``tool_choice`` as the request takes it (spec 4.1).

    None means ``auto``, or ``required`` when ``tool_required``; ``auto``, ``none`` and
    ``required`` pass through; any other string is the name of the function to force.
    """
    if tool_choice is None:
        return "required" if tool_required else "auto"
    if isinstance(tool_choice, Mapping):
        return dict(tool_choice)
    if tool_choice in ("auto", "none", "required"):
        return tool_choice
    return {"type": "function", "function": {"name": tool_choice}}


# ---------------------------------------------------------------- responses


def assistant_message(content: str | None, tool_calls: Sequence[ToolCall]) -> ChatMessage:
    """The service's assistant message as a LlamaIndex message.

    Text becomes a ``TextBlock`` (also when empty, unless the message is only tool calls),
    each call a ``ToolCallBlock`` with its arguments parsed; the calls are also kept in the
    wire shape in ``additional_kwargs["tool_calls"]``, where older LlamaIndex code looks.
    """
    blocks: list[Any] = []
    if content or not tool_calls:
        blocks.append(TextBlock(text=content or ""))
    blocks.extend(
        ToolCallBlock(
            tool_call_id=call.id,
            tool_name=call.function.name,
            tool_kwargs=_parse_arguments(call.function.arguments),
        )
        for call in tool_calls
    )
    additional_kwargs = (
        {"tool_calls": [call.model_dump() for call in tool_calls]} if tool_calls else {}
    )
    return ChatMessage(
        role=MessageRole.ASSISTANT, blocks=blocks, additional_kwargs=additional_kwargs
    )


def _parse_arguments(arguments: str) -> dict[str, Any] | str:
    # The service sends a JSON object; a stream may show it half-written, kept as the string.
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return value if isinstance(value, dict) else arguments


def usage_kwargs(usage: Usage | None) -> dict[str, int]:
    """Token usage as LlamaIndex integrations report it in ``additional_kwargs``."""
    if usage is None:
        return {}
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def token_logprobs(entries: Sequence[TokenLogprob] | None) -> list[list[LogProb]] | None:
    """``ChatResponse.logprobs`` from the service's entries, one list per output token as the
    LlamaIndex OpenAI integration gives them: the token's ``top_logprobs``, or, where none
    were asked (``top_logprobs`` 0), the token itself. None when logprobs were not asked."""
    if entries is None:
        return None
    return [
        [
            LogProb(token=alt.token, logprob=alt.logprob, bytes=alt.bytes or [])
            for alt in (entry.top_logprobs or [entry])
        ]
        for entry in entries
    ]


def chat_response(completion: ChatCompletion) -> ChatResponse:
    """A completion as a ``ChatResponse``: the message, the completion as ``raw``, the
    token usage in ``additional_kwargs`` and, when asked, the ``logprobs``."""
    if not completion.choices:
        raise ValueError(f"completion {completion.id} holds no choice")
    choice = completion.choices[0]
    message = choice.message
    return ChatResponse(
        message=assistant_message(message.content, message.tool_calls or ()),
        raw=completion,
        additional_kwargs=usage_kwargs(completion.usage),
        logprobs=token_logprobs(choice.logprobs.content if choice.logprobs else None),
    )


def tool_selections(message: ChatMessage) -> list[ToolSelection]:
    """The tool calls of an assistant message, as LlamaIndex's ``ToolSelection``s."""
    selections = []
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            arguments = block.tool_kwargs
            if isinstance(arguments, str):
                parsed = _parse_arguments(arguments)
                # Half-written arguments (mid-stream) read as no arguments yet.
                arguments = parsed if isinstance(parsed, dict) else {}
            selections.append(
                ToolSelection(
                    tool_id=block.tool_call_id or "",
                    tool_name=block.tool_name,
                    tool_kwargs=arguments,
                )
            )
    if selections:
        return selections
    for call in _legacy_tool_calls(message.additional_kwargs, 0):
        parsed = _parse_arguments(call.function.arguments)
        selections.append(
            ToolSelection(
                tool_id=call.id,
                tool_name=call.function.name,
                tool_kwargs=parsed if isinstance(parsed, dict) else {},
            )
        )
    return selections


def completion_response(response: ChatResponse) -> CompletionResponse:
    """A chat response as the ``CompletionResponse`` of ``complete`` and its stream forms."""
    return CompletionResponse(
        text=response.message.content or "",
        delta=response.delta,
        raw=response.raw,
        additional_kwargs=dict(response.additional_kwargs),
        logprobs=response.logprobs,
    )
