"""The offered tools as the model is shown them: what a framework adds to a definition on its
own, restating what the definition already says, is left out.

LlamaIndex's ``FunctionTool`` writes the Python signature above the docstring
(``get_weather(city: 'str') -> 'str'``) and pydantic gives each parameter a title made from
its name (``"from_unit": {"title": "From Unit", ...}``); LangChain's ``convert_to_openai_tool``
sends neither. Both restate the name and the parameters the schema already gives, and both
reached the model: asked "東京の天気を教えてください。" the 1.5B model called
``get_weather(city="東京")`` with LlamaIndex's definitions and ``get_weather(city="Tokyo")``
with LangChain's, and the tool-need check's question read the signature line enough to keep
a weather call for a greeting (benchmarks/README.md, "Built (s37): the tools as the model
is shown them"). So the same tools are shown the same, whichever framework wrote them: in the chat
template's tool list, in the tool-need check's question and in every rule that reads a
description. A title that says more than the parameter's name, and a description that is a
signature alone, are kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from backend.protocol.schemas import ToolDefinition


def shown_tools(tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
    """``tools`` with a description's first line that repeats the tool's signature left out,
    and the titles pydantic made from parameter names; definitions with neither are the
    same objects."""
    shown = []
    for tool in tools:
        function = tool.function
        description = shown_description(function.name, function.description)
        parameters = _without_name_titles(function.parameters)
        if description == function.description and parameters == function.parameters:
            shown.append(tool)
            continue
        changed = function.model_copy(update={"description": description, "parameters": parameters})
        shown.append(tool.model_copy(update={"function": changed}))
    return shown


def shown_description(name: str, description: str | None) -> str | None:
    """The description without a first line that only writes the tool's signature
    (``name(...)``), where more lines follow."""
    if not description:
        return description
    lines = description.strip().splitlines()
    if len(lines) > 1 and re.match(rf"{re.escape(name)}\s*\(", lines[0].strip()):
        return "\n".join(lines[1:]).strip()
    return description


def _without_name_titles(schema: Any) -> Any:
    """``schema`` without the titles pydantic writes from property names (``from_unit``:
    "From Unit"), in nested objects and array items too."""
    if isinstance(schema, list):
        return [_without_name_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept = {key: _without_name_titles(value) for key, value in schema.items()}
    properties = kept.get("properties")
    if isinstance(properties, dict):
        kept["properties"] = {
            name: _untitled(name, value) if isinstance(value, dict) else value
            for name, value in properties.items()
        }
    return kept


def _untitled(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    if schema.get("title") != name.replace("_", " ").title():
        return schema
    return {key: value for key, value in schema.items() if key != "title"}
