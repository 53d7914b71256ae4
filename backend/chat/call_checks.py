"""Which generated calls are worth making: not one the conversation already answered, and not
one whose arguments were copied from a tool's description rather than taken from the
conversation.

Both faults come from reading a conversation, not from the schema, so the constraint cannot
rule them out; ``backend.chat.generation`` drops such calls after they are generated.

* A repeated call (the same tool and the same arguments as one whose result the conversation
  holds) would only give the same result again. Once tools stay offered after results, the
  small Qwen models often write the call they just made again instead of answering.
* A copied argument: asked "What is the balance of customer Jun Seo?" with a tool described as
  "balance by customer id (an id such as C-1234)", the 1.5B model calls it with ``C-1234``
  instead of first looking the id up with the tool that finds it. A string argument holding a
  digit that appears in an offered tool's description and in no message of the conversation
  is taken as copied from the description's example: an id or a code is data, and the data of
  a conversation is what its messages say. Values without a digit are left alone, since
  choosing one of the values a description names ("celsius or fahrenheit") is how such
  arguments are meant to be filled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from backend.protocol.schemas import ChatMessage, FunctionCall, ToolCall, ToolDefinition

#: What the model is told of a call that copied ``{values}`` from a tool's description, in
#: the exchange it calls again after (``example_exchange``).
COPIED_RESULT = (
    "error: {values} is only an example in the tool's description, not a value from this "
    "conversation. First call the tool that finds the real value."
)

#: A call as compared with others: the tool's name and its arguments as canonical JSON.
CallKey = tuple[str, str]


def call_key(name: str, arguments: str) -> CallKey:
    """What makes two calls the same call: the tool and the arguments as values (key order
    and spacing aside)."""
    try:
        value: Any = json.loads(arguments)
    except json.JSONDecodeError:
        value = arguments
    return name, json.dumps(value, sort_keys=True, ensure_ascii=False)


def answered_calls(messages: Sequence[ChatMessage]) -> frozenset[CallKey]:
    """The ``call_key`` of every call in ``messages`` that a tool message answered."""
    results = {m.tool_call_id for m in messages if m.role == "tool"}
    return frozenset(
        call_key(call.function.name, call.function.arguments)
        for m in messages
        for call in m.tool_calls or ()
        if call.id in results
    )


def conversation_text(messages: Sequence[ChatMessage]) -> str:
    """What the conversation's messages say (the arguments of earlier calls included),
    casefolded: where an argument's value should come from."""
    parts = [m.content or "" for m in messages]
    parts += [call.function.arguments for m in messages for call in m.tool_calls or ()]
    return "\n".join(parts).casefold()


def copied_arguments(call: FunctionCall, tools: Sequence[ToolDefinition], said: str) -> list[str]:
    """The string values of ``call``'s arguments that look copied from a tool's description:
    holding a digit, found in some offered tool's definition, and not in ``said``
    (``conversation_text``)."""
    described = "\n".join(_definition_text(tool) for tool in tools).casefold()
    try:
        arguments = json.loads(call.arguments)
    except json.JSONDecodeError:
        return []
    return [
        value
        for value in _strings(arguments)
        if any(c.isdigit() for c in value)
        and value.strip().casefold() in described
        and value.strip().casefold() not in said
    ]


def _definition_text(tool: ToolDefinition) -> str:
    function = tool.function
    return (
        f"{function.description or ''}\n{json.dumps(function.parameters or {}, ensure_ascii=False)}"
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if value.strip():
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass(frozen=True)
class CopiedCall:
    """A generated call and the argument values it copied from a tool's description."""

    call: ToolCall
    values: list[str]


def example_exchange(copied: Sequence[CopiedCall]) -> list[ChatMessage]:
    """The calls that copied values, and for each a result saying so: the model, shown this
    after the conversation, calls again."""
    calls = [c.call for c in copied]
    results = [
        ChatMessage(
            role="tool",
            tool_call_id=c.call.id,
            content=COPIED_RESULT.format(values=", ".join(c.values)),
        )
        for c in copied
    ]
    return [ChatMessage(role="assistant", content=None, tool_calls=calls), *results]
