"""The shape a tool call must take, for engines that can constrain decoding to it.

Small models sometimes write a call with a missing required key, a string where the schema
wants a number, or a value outside an enum. Engines that support constraints mask, at every
step, the tokens that would break this JSON Schema (``backend.engines.token_mask``, on
xgrammar), which makes every such call impossible: the call object is
``{"name": <one of the tools>, "arguments": <that tool's parameters>}``, then the end of the
turn. Only the call is constrained; free-text answers are not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backend.schemas import ToolDefinition
from backend.tool_calls import TOOL_CALL_OPEN

#: What the prompt ends with when a constrained call is generated: the model writes the JSON.
CALL_PREFILL = f"{TOOL_CALL_OPEN}\n"
#: Key order of the call object: the name first, so arguments follow the chosen tool.
KEY_ORDER = ("name", "arguments")


@dataclass(frozen=True)
class ToolCallConstraint:
    """A JSON Schema for one call to any of ``tools``; the schema text is the cache key."""

    schema_json: str

    @classmethod
    def for_tools(cls, tools: Sequence[ToolDefinition]) -> ToolCallConstraint:
        if not tools:
            raise ValueError("a tool-call constraint needs at least one tool")
        alternatives = [_call_schema(tool) for tool in tools]
        schema = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
        # Insertion order kept: the grammar writes "name" before "arguments".
        return cls(json.dumps(schema, ensure_ascii=False))

    @property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.schema_json)


def _call_schema(tool: ToolDefinition) -> dict[str, Any]:
    parameters = tool.function.parameters or {"type": "object", "properties": {}}
    return {
        "type": "object",
        "properties": {"name": {"const": tool.function.name}, "arguments": parameters},
        "required": list(KEY_ORDER),
    }
