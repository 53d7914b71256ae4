"""Rendering a chat request into prompt token ids through the model's own chat template."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from backend.call_check import CallCheck
from backend.errors import BadRequestError
from backend.schemas import ChatMessage, ToolChoice, ToolChoiceObject, ToolDefinition
from backend.tool_call_constraint import CALL_PREFILL, ToolCallConstraint
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
    #: For an engine that constrains decoding: the shape the generated call must take
    #: (a forced call, whose opening is already in ``prefill``).
    constraint: ToolCallConstraint | None = None
    #: For an engine that constrains decoding, when the model may choose (``auto``): the
    #: prompt to continue from once its answer turns out to start a call, and that call's
    #: constraint. The call is then generated under the constraint instead.
    call_ids: list[int] | None = None
    call_constraint: ToolCallConstraint | None = None
    #: With ``auto``, when the conversation ends with a user message: what checking that a
    #: generated call is wanted needs (``backend.call_check``).
    call_check: CallCheck | None = None


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
    constrained: bool = False,
) -> RenderedPrompt:
    """Apply the chat template (with tool definitions) and tokenize.

    ``tool_choice="none"`` renders without tools, so the model cannot call one. Without a
    system message the default one is used, so the model does not introduce itself under its
    upstream name. ``constrained``: the engine will constrain tool calls to their schemas
    (see ``backend.tool_call_constraint``), so a call is opened with the tag alone and the
    model writes the whole JSON object under the constraint.
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
    tool_names = frozenset(t.function.name for t in active_tools)
    if constrained and active_tools:
        rendered = _constrained(tokenizer, text, active_tools, tool_choice, tool_names)
        if rendered.call_ids is not None and messages[-1].role == "user":
            plain = tokenizer.apply_chat_template(
                conversation, add_generation_prompt=True, tokenize=False
            )
            check = CallCheck(
                message=messages[-1].content or "",
                descriptions={t.function.name: t.function.description or "" for t in active_tools},
                plain_ids=list(tokenizer.encode(plain, add_special_tokens=False)),
            )
            rendered = replace(rendered, call_check=check)
        return rendered
    prefill = _prefill_for(tool_choice) if active_tools else ""
    ids = tokenizer.encode(text + prefill, add_special_tokens=False)
    return RenderedPrompt(ids=list(ids), prefill=prefill, tool_names=tool_names)


def _constrained(
    tokenizer: Any,
    text: str,
    tools: list[ToolDefinition],
    tool_choice: ToolChoice | None,
    tool_names: frozenset[str],
) -> RenderedPrompt:
    if isinstance(tool_choice, ToolChoiceObject):
        tools = [t for t in tools if t.function.name == tool_choice.function.name]
    constraint = ToolCallConstraint.for_tools(tools)
    call_ids = list(tokenizer.encode(text + CALL_PREFILL, add_special_tokens=False))
    if tool_choice in (None, "auto"):
        ids = list(tokenizer.encode(text, add_special_tokens=False))
        return RenderedPrompt(ids, "", tool_names, call_ids=call_ids, call_constraint=constraint)
    return RenderedPrompt(call_ids, CALL_PREFILL, tool_names, constraint=constraint)
