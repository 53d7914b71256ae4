"""What a tool's parameter names, and which offered tool gives it: the words of its name
(``customer_id`` is a "customer id"), whether it names an identifier, the tools whose
description names it, an id of another kind given to it, and an id given to the tool that
finds ids of its kind.

An id of another kind: asked how many units of the product in order O-1003 are in stock
where it ships from, the 1.5B model called ``get_stock(product_id="O-1003", ...)`` at once
instead of first finding the order's product with ``get_order``; the tool answered "unknown
product id" and the model answered that none was in stock. The id is in the message, so it
is not made up, but it is an order id: its letters (``O``) begin the kind of another
tool's id parameter (``order_id``), not the kind asked for (``product``). It is read so only
where an offered tool turns the one kind into the other (it takes ``order_id`` and its
description names the "product id"): there the call skipped that lookup. An id whose kind
no offered tool turns into the one asked for is left alone: a user's id ``U-5`` given as an
``owner_id`` may well be one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.protocol.schemas import ToolDefinition


def _parameter_ending(*words: str) -> re.Pattern[str]:
    """Parameter names ending in one of ``words``, snake_case (``order_id``, ``ID``) or
    camelCase (``orderId``)."""
    snake = "|".join(words)
    camel = "|".join(word.capitalize() for word in words)
    return re.compile(rf"(?:^|_)(?i:{snake})$|[a-z](?:{camel})$")


#: Parameter names that name an identifier, whose value must come from the conversation.
IDENTIFIER_PARAMETER = _parameter_ending("id", "ids", "number", "code", "key")
#: Parameter names that name an id proper, whose value is data even without a digit.
ID_PARAMETER = _parameter_ending("id", "ids")
#: A code's leading letters, before its digits (``O-1003``, ``ord_42``, ``P77``).
_LEADING_LETTERS = re.compile(r"([^\W\d_]+)[-_ .#:]?\d")


def parameter_words(parameter: str) -> str:
    """``customer_id`` and ``customerId`` as "customer id"."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", parameter).replace("_", " ")
    return " ".join(spaced.split()).casefold()


def tools_giving(parameter: str, tools: Sequence[ToolDefinition], called: str) -> list[str]:
    """The offered tools other than ``called`` whose description names what ``parameter``
    asks for and that do not take it themselves: for ``product_id``, a tool described "Get
    the product id and the shipping warehouse of an order". Only parameters of two words or
    more are matched (an ``id`` alone names nothing); a possessive reads as the word
    ("a customer's id" names ``customer_id``)."""
    words = parameter_words(parameter)
    if " " not in words:
        return []
    phrase = re.compile(rf"\b{re.escape(words)}\b")
    return [
        tool.function.name
        for tool in tools
        if tool.function.name != called
        and parameter not in _properties(tool)
        and phrase.search(_plain_words(tool.function.description or ""))
    ]


def kind_given(
    parameter: str, value: str, tools: Sequence[ToolDefinition], called: str
) -> str | None:
    """The kind of id ``value`` is ("order id") where, given to ``parameter`` of ``called``,
    it is an id of another kind: its leading letters begin the kind of an identifier
    parameter of an offered tool that gives ``parameter`` (``tools_giving``), and not the
    kind ``parameter`` asks for. None otherwise."""
    leading = _LEADING_LETTERS.match(value.strip())
    asked = parameter_words(parameter).split()
    if not leading or len(asked) < 2 or not IDENTIFIER_PARAMETER.search(parameter):
        return None
    letters = leading[1].casefold()
    if asked[0].startswith(letters):
        return None
    giving = tools_giving(parameter, tools, called)
    taken = (other for tool in tools if tool.function.name in giving for other in _properties(tool))
    kinds = (parameter_words(other) for other in taken if IDENTIFIER_PARAMETER.search(other))
    return next((k for k in kinds if " " in k and k.startswith(letters)), None)


def kind_looked_up(value: str, tools: Sequence[ToolDefinition], called: str) -> str | None:
    """The kind of id ``value`` is ("customer id") where ``called`` is a tool that finds ids
    of that kind for another offered tool (``tools_giving``) and ``value`` already is one:
    its leading letters begin the kind. None otherwise."""
    leading = _LEADING_LETTERS.match(value.strip())
    if not leading:
        return None
    letters = leading[1].casefold()
    for tool in tools:
        for parameter in _properties(tool):
            kind = parameter_words(parameter)
            if (
                " " in kind
                and kind.startswith(letters)
                and IDENTIFIER_PARAMETER.search(parameter)
                and called in tools_giving(parameter, tools, tool.function.name)
            ):
                return kind
    return None


def _properties(tool: ToolDefinition) -> dict[str, object]:
    return (tool.function.parameters or {}).get("properties") or {}


def _plain_words(text: str) -> str:
    """``text`` casefolded, possessives dropped and spaces made single."""
    return " ".join(re.sub(r"['’]s\b", "", text.casefold()).split())
