"""Rendering a chat request into prompt token ids through the model's own chat template."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backend.errors import BadRequestError
from backend.schemas import ChatMessage, ToolChoice, ToolDefinition
from backend.tool_calls import TOOL_CALL_OPEN

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


@dataclass(frozen=True)
class RenderedPrompt:
    """The prompt's token ids, and what the processor needs to read the answer."""

    ids: list[int]
    #: Text placed at the start of the assistant turn (a forced tool call's opening).
    prefill: str
    #: Names of the tools the model may call; empty when tools are off.
    tool_names: frozenset[str]


def _template_message(message: ChatMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.tool_calls:
        # Templates render arguments with ``tojson``: give them objects, not JSON strings,
        # or the model sees doubly-encoded arguments and learns to write them that way.
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.function.name,
                    "arguments": _arguments(call.function.arguments),
                },
            }
            for call in message.tool_calls
        ]
    if message.role == "tool":
        entry["tool_call_id"] = message.tool_call_id
    return entry


def _with_tool_results_as_user_turn(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation with its last tool call and results rewritten as one user turn.

    Rendered the template's way (a ``<tool_call>`` turn, then ``<tool_response>``), the
    small Qwen models echo the call instead of answering; shown the results as plain text
    with the instruction to answer, they answer from them. Earlier exchanges keep the
    template's form.
    """
    end = len(messages)
    start = end
    while start > 0 and messages[start - 1].role == "tool":
        start -= 1
    caller = messages[start - 1] if start > 0 and messages[start - 1].tool_calls else None
    calls = {call.id: call for call in caller.tool_calls or ()} if caller else {}
    lines = []
    for message in messages[start:end]:
        call = calls.get(message.tool_call_id or "")
        name = f"{call.function.name}({call.function.arguments})" if call else "a tool"
        lines.append(f"- {name} returned: {message.content or ''}")
    results = {
        "role": "user",
        "content": "Results of the tool calls:\n"
        + "\n".join(lines)
        + "\nAnswer my question using these results.",
    }
    head = messages[: start - 1] if caller else messages[:start]
    return [_template_message(m) for m in head] + [results]


def _arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def _prefill_for(tool_choice: ToolChoice | None) -> str:
    """Forcing a call by writing its opening into the assistant turn.

    The model then only has to continue the JSON, which is far more reliable for small
    models than an instruction, and costs nothing.
    """
    if tool_choice is None or isinstance(tool_choice, str):
        return f'{TOOL_CALL_OPEN}\n{{"name": "' if tool_choice == "required" else ""
    name = json.dumps(tool_choice.function.name)
    return f'{TOOL_CALL_OPEN}\n{{"name": {name}, "arguments":'


def render_prompt(
    tokenizer: Any,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolDefinition] | None = None,
    tool_choice: ToolChoice | None = None,
) -> RenderedPrompt:
    """Apply the chat template (with tool definitions) and tokenize.

    ``tool_choice="none"`` renders without tools, so the model cannot call one. Without a
    system message the default one is used, so the model does not introduce itself under its
    upstream name.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise BadRequestError(
            "invalid request: the configured chat model has no chat template; configure an "
            "instruction-tuned model"
        )
    answering = tool_choice in (None, "auto") and messages[-1].role == "tool"
    if answering:
        conversation = _with_tool_results_as_user_turn(messages)
    else:
        conversation = [_template_message(m) for m in messages]
    if conversation[0]["role"] != "system":
        conversation.insert(0, {"role": "system", "content": DEFAULT_SYSTEM_PROMPT})
    active_tools = list(tools or ()) if tool_choice != "none" and not answering else []
    template_tools = [t.model_dump(exclude_none=True) for t in active_tools] or None
    text = tokenizer.apply_chat_template(
        conversation, tools=template_tools, add_generation_prompt=True, tokenize=False
    )
    prefill = _prefill_for(tool_choice) if active_tools else ""
    ids = tokenizer.encode(text + prefill, add_special_tokens=False)
    return RenderedPrompt(
        ids=list(ids),
        prefill=prefill,
        tool_names=frozenset(t.function.name for t in active_tools),
    )
