"""Finding tool calls in a chat model's text output.

The embedded Qwen2.5 models write a call as ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>`` as their template asks, but also as a fenced ```json block or bare JSON
(see MODELS.md); all three are accepted. A candidate counts as a call only when it is a JSON
object naming one of the request's tools, so ordinary JSON answers stay text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from backend.schemas import FunctionCall, ToolCall, new_tool_call_id

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:json|tool_call)?\s*\n?(.*?)\n?\s*```", re.DOTALL)


@dataclass(frozen=True)
class ParsedOutput:
    """A model's output split into free text and tool calls."""

    content: str | None
    tool_calls: list[ToolCall]


def _json_values(text: str) -> list[Any]:
    """Every JSON value in ``text``, read back to back (JSON lines, or several objects)."""
    decoder = json.JSONDecoder()
    values, pos, text = [], 0, text.strip()
    while pos < len(text):
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return []
        values.append(value)
        pos = end
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
    return values


def _as_call(value: Any, tool_names: frozenset[str]) -> FunctionCall | None:
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):  # OpenAI-shaped {"type": "function", ...}
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or name not in tool_names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return FunctionCall(name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def _calls_from(blocks: list[str], tool_names: frozenset[str]) -> list[FunctionCall] | None:
    calls: list[FunctionCall] = []
    for block in blocks:
        values = _json_values(block)
        if not values:
            return None
        for value in values if not isinstance(values[0], list) else values[0]:
            call = _as_call(value, tool_names)
            if call is None:
                return None
            calls.append(call)
    return calls or None


def parse_tool_calls(text: str, tool_names: frozenset[str]) -> ParsedOutput:
    """Split ``text`` into content and tool calls.

    A call is recognised only where the output begins with it: tagged calls (text after the
    last one is dropped), or a fenced block or bare JSON that is the whole output (a coder
    model often answers with JSON or code blocks that are not calls). Starting with the call
    is what lets streaming send plain answers at once and still match the non-streamed
    message, and it keeps ``content`` null beside ``tool_calls`` as the spec wants.
    """
    if tool_names:
        stripped = text.strip()
        candidates: list[list[str]] = []
        if stripped.startswith(TOOL_CALL_OPEN):
            candidates.append(_TAGGED.findall(stripped))
        fenced = _FENCED.fullmatch(stripped)
        if fenced:
            candidates.append([fenced.group(1)])
        if stripped.startswith(("{", "[")):
            candidates.append([stripped])
        for blocks in candidates:
            calls = _calls_from(blocks, tool_names)
            if calls:
                return ParsedOutput(
                    content=None,
                    tool_calls=[ToolCall(id=new_tool_call_id(), function=c) for c in calls],
                )
    return ParsedOutput(content=text, tool_calls=[])


def may_become_tool_call(text: str) -> bool:
    """Whether output that begins with ``text`` could still turn out to be a tool call.

    Used while streaming: such text is held back until the output is complete, because a
    call must go out as ``tool_calls``, never as content fragments.
    """
    stripped = text.lstrip()
    if not stripped:
        return True
    if stripped.startswith(("{", "[", "```")):
        return True
    return TOOL_CALL_OPEN.startswith(stripped) or stripped.startswith(TOOL_CALL_OPEN)


_CALL_OBJECT_START = '{"name"'


def opens_tool_call(text: str) -> bool | None:
    """Whether an answer beginning with ``text`` is a tool call; None while undecided.

    Recognises the three ways the models open a call (see the module docstring): the tag,
    a fenced ``json`` block or a bare object, each starting with ``{"name"``.
    """
    text = text.lstrip()
    if not text:
        return None
    if text.startswith(TOOL_CALL_OPEN):
        return True
    if TOOL_CALL_OPEN.startswith(text) or "```".startswith(text):
        return None
    if text.startswith("```"):
        if "\n" not in text:
            return None if len(text) <= len("```tool_call") else False
        fence, rest = text.split("\n", 1)
        if fence.strip() not in ("```", "```json", "```tool_call"):
            return False
        return opens_tool_call(rest) if rest.strip().startswith("{") or not rest.strip() else False
    if text.startswith("{"):
        compact = re.sub(r"\s+", "", text)
        if compact.startswith(_CALL_OBJECT_START):
            return True
        return None if _CALL_OBJECT_START.startswith(compact) else False
    return False
