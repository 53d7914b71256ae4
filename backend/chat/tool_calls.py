"""Tool calls in a chat model's output: how a call opens, how it is parsed, how it is forced.

The embedded Qwen2.5 models write a call as ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>`` as their template asks, but also as a fenced ```json block or bare JSON, and
sometimes as a JSON array of calls (see MODELS.md). One rule, ``opens_tool_call``, says from
the beginning of an answer whether it is a call; everything else asks it: generation switches
to a constrained call when it says yes, streaming holds text back while it is undecided, and
the parser reads calls only from output it calls one. A candidate counts as a call only when it
is a JSON object naming one of the request's tools, so ordinary JSON answers stay text.

Engines that constrain decoding generate the call object under ``call_constraint``: a JSON
Schema admitting ``{"name": <one of the tools>, "arguments": <that tool's parameters>}``,
so every such call parses and names a tool with schema-valid arguments. Where a reply may hold
several calls (OpenAI's ``parallel_tool_calls``, on by default), the constraint is a JSON
array of such objects. With it off, a reply holds at most one call (``allowed_calls``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from backend.engines.base import JSONSchemaConstraint
from backend.protocol.schemas import (
    FunctionCall,
    ToolCall,
    ToolChoice,
    ToolChoiceObject,
    ToolDefinition,
    new_tool_call_id,
)

TOOL_CALL_OPEN = "<tool_call>"
#: How the Qwen templates show a tool's result; an answer opening with it is the model
#: making a result up.
TOOL_RESPONSE_OPEN = "<tool_response>"
#: Added to the system message where a constrained reply may hold several calls: the model's
#: template asks for one call per ``<tool_call>`` tag, but ``call_constraint`` holds several
#: calls to one array in one tag, so the model is told the format it is held to.
SEVERAL_CALLS_FORMAT = (
    "To call several tools, or one tool more than once, write all the calls as one JSON array "
    "inside a single <tool_call></tool_call> tag: one call for each thing the user asks for."
)
#: Key order of the call object: the name first, so arguments follow the chosen tool.
KEY_ORDER = ("name", "arguments")

Call = TypeVar("Call")

_CALL_OBJECT_START = '{"name"'
_CALL_FENCES = ("```", "```json", "```tool_call")
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
#: A fenced block; its closing fence may be missing, as the tag's may (a call generated from
#: the model's own fence ends with the JSON, ``backend.chat.call_form``).
_FENCED = re.compile(r"```(?:json|tool_call)?\s*\n?(.*?)\n?\s*(?:```|$)", re.DOTALL)


# ---------------------------------------------------------------- recognising a call


def opens_tool_call(text: str, json_answers: bool = False) -> bool | None:
    """Whether an answer beginning with ``text`` is a tool call; None while undecided.

    A call opens with the tag, or with ``{"name"`` (or ``[{"name"`` for several calls), bare
    or inside a ```json fence. Anything else is text. ``json_answers``: answers are JSON
    themselves (a ``response_format``), so only the tag opens a call.
    """
    text = text.lstrip()
    if not text:
        return None
    if text.startswith(TOOL_CALL_OPEN):
        return True
    if TOOL_CALL_OPEN.startswith(text):
        return None
    if json_answers:
        return False
    if "```".startswith(text):
        return None
    if text.startswith("```"):
        if "\n" not in text:
            return None if len(text) <= len("```tool_call") else False
        fence, rest = text.split("\n", 1)
        if fence.strip() not in _CALL_FENCES:
            return False
        return _opens_call_object(rest)
    return _opens_call_object(text)


def _opens_call_object(text: str) -> bool | None:
    """Whether JSON beginning with ``text`` is a call object, or an array starting with one."""
    compact = re.sub(r"\s+", "", text)
    if not compact:
        return None
    if compact.startswith("["):
        compact = compact[1:]
        if not compact:
            return None
    if compact.startswith("{{"):
        # Qwen2.5-Coder's chat template shows the call format with its braces doubled
        # (``{{"name": <function-name>, ...}}``), and its models sometimes copy them.
        compact = compact[1:]
    if compact.startswith(_CALL_OBJECT_START):
        return True
    return None if _CALL_OBJECT_START.startswith(compact) else False


# ---------------------------------------------------------------- parsing calls


@dataclass(frozen=True)
class ParsedOutput:
    """A model's output split into free text and tool calls."""

    content: str | None
    tool_calls: list[ToolCall]


def parse_tool_calls(text: str, tool_names: frozenset[str], parallel: bool = True) -> ParsedOutput:
    """Split ``text`` into content and tool calls.

    Only output that ``opens_tool_call`` says is a call is read for calls: tagged calls (text
    after the last one is dropped), or a fenced block or bare JSON that is the whole output (a
    coder model often answers with JSON or code blocks that are not calls). Starting with the
    call is what lets streaming send plain answers at once and still match the non-streamed
    message, and it keeps ``content`` null beside ``tool_calls`` as the spec wants.
    ``parallel``: several calls may be kept (else the first, ``allowed_calls``).
    """
    if tool_names and opens_tool_call(text):
        stripped = text.strip()
        if stripped.startswith(TOOL_CALL_OPEN):
            blocks = _TAGGED.findall(stripped)
        elif fenced := _FENCED.fullmatch(stripped):
            blocks = [fenced.group(1)]
        else:
            blocks = [stripped]
        calls = _calls_from(blocks, tool_names)
        if calls:
            return ParsedOutput(
                content=None,
                tool_calls=[
                    ToolCall(id=new_tool_call_id(), function=c)
                    for c in allowed_calls(calls, parallel)
                ],
            )
    return ParsedOutput(content=text, tool_calls=[])


def allowed_calls(calls: list[Call], parallel: bool) -> list[Call]:
    """The calls one reply may hold: all of them, or with ``parallel_tool_calls: false`` the
    first (OpenAI's "at most one")."""
    return calls if parallel else calls[:1]


def several_calls_allowed(parallel_tool_calls: bool, tool_choice: ToolChoice | None) -> bool:
    """Whether a reply may hold several calls: as the request asks, except that a forced
    function is called once (as vLLM does)."""
    return parallel_tool_calls and not isinstance(tool_choice, ToolChoiceObject)


def _json_values(text: str) -> list[Any]:
    """Every JSON value in ``text``, read back to back (JSON lines, or several objects). An
    array that does not close (a reply cut by ``max_tokens``) gives its complete items."""
    decoder = json.JSONDecoder()
    values, pos, text = [], 0, text.strip()
    while pos < len(text):
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            if not values and text.startswith("["):
                return [_complete_items(decoder, text)]
            return []
        values.append(value)
        pos = _after_separators(text, end)
    return values


def _complete_items(decoder: json.JSONDecoder, text: str) -> list[Any]:
    """The items of the unclosed array ``text`` that were written whole."""
    items, pos = [], _after_separators(text, 1)
    while pos < len(text):
        try:
            item, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        items.append(item)
        pos = _after_separators(text, end)
    return items


def _after_separators(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n,":
        pos += 1
    return pos


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


# ---------------------------------------------------------------- forcing and constraining


def call_prefill(tool_choice: ToolChoice | None, constrained: bool) -> str:
    """What the assistant turn starts with when a call is forced (or, with ``constrained``,
    generated under ``call_constraint``): the call's opening, which the model continues.

    Writing the opening is far more reliable for small models than an instruction, and costs
    nothing. Under a constraint the model writes the whole object, name included; without one,
    a forced function's name is written for it. Returns "" when no call is forced.
    """
    if constrained:
        return f"{TOOL_CALL_OPEN}\n"
    if tool_choice is None or isinstance(tool_choice, str):
        return f'{TOOL_CALL_OPEN}\n{{"name": "' if tool_choice == "required" else ""
    name = json.dumps(tool_choice.function.name)
    return f'{TOOL_CALL_OPEN}\n{{"name": {name}, "arguments":'


#: Calls in one constrained reply: more than a request of our sets asks for, and a bound on a
#: model listing invented calls without end (``backend.engines.json_bounds``).
MAX_CALLS = 16


def call_constraint(
    tools: Sequence[ToolDefinition], parallel: bool = False
) -> JSONSchemaConstraint:
    """The schema of one call to any of ``tools`` (insertion order kept: the grammar writes
    "name" before "arguments"); with ``parallel``, of a JSON array of one or more calls.

    An array rather than repeated ``<tool_call>`` tags: the 1.5B model, once a tag is closed,
    ends its turn even when a second call is needed, while inside an array it continues with
    ``, {`` for a second call and closes with ``]`` after one (measured on
    benchmarks/eval/parallel_calls.jsonl; the parser reads arrays of calls).
    """
    if not tools:
        raise ValueError("a tool-call constraint needs at least one tool")
    alternatives = [_call_schema(tool) for tool in tools]
    schema = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
    if not parallel:
        return JSONSchemaConstraint(json.dumps(schema, ensure_ascii=False))
    schema = {"type": "array", "items": schema, "minItems": 1}
    return JSONSchemaConstraint(json.dumps(schema, ensure_ascii=False), items=MAX_CALLS)


def _call_schema(tool: ToolDefinition) -> dict[str, Any]:
    parameters = tool.function.parameters or {"type": "object", "properties": {}}
    return {
        "type": "object",
        "properties": {"name": {"const": tool.function.name}, "arguments": parameters},
        "required": list(KEY_ORDER),
    }
