"""LangChain's ``tool_choice`` values as the service's: a pure function, tested offline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.tools import BaseTool

ToolLike = dict[str, Any] | type | Callable[..., Any] | BaseTool
ToolChoiceLike = str | bool | dict[str, Any] | None


def tool_choice_to_wire(
    tool_choice: ToolChoiceLike, tool_names: Sequence[str]
) -> str | dict[str, Any] | None:
    """LangChain's ``tool_choice`` values as the service's (spec 4.1).

    ``"auto"`` and ``"none"`` pass through; ``"any"`` and ``"required"`` force some call
    (``"required"``, or the function itself when only one tool is bound: the same demand,
    and the service then writes the name for the model, which small models need); a tool's
    name forces that function; ``True`` forces the only tool; ``False`` and ``None`` leave
    the choice to the service. A dict must already be the wire
    shape ``{"type": "function", "function": {"name": ...}}``.

    Raises:
        ValueError: an unknown name, or ``True`` with other than exactly one tool.
    """
    if tool_choice is None or tool_choice is False:
        return None
    if tool_choice is True:
        if len(tool_names) != 1:
            raise ValueError(
                f"tool_choice=True forces the only tool, but {len(tool_names)} tools are "
                "bound; name the tool to force instead"
            )
        return _forced(tool_names[0])
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        if tool_choice.get("type") != "function" or not isinstance(name, str):
            raise ValueError(
                "a tool_choice dict must be {'type': 'function', 'function': {'name': ...}}, "
                f"got {tool_choice!r}"
            )
        return _forced(_known(name, tool_names))
    if tool_choice in ("auto", "none"):
        return tool_choice
    if tool_choice in ("any", "required"):
        return _forced(tool_names[0]) if len(tool_names) == 1 else "required"
    return _forced(_known(tool_choice, tool_names))


def _forced(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _known(name: str, tool_names: Sequence[str]) -> str:
    if name not in tool_names:
        raise ValueError(
            f"tool_choice names {name!r}, which is not among the bound tools "
            f"({', '.join(tool_names) or 'none'}); use auto, none, any, required or a tool name"
        )
    return name
