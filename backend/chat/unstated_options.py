"""Optional number arguments that no message states, left to the tool.

Offered a tool with optional parameters, the model fills some of them with values the user
never gave: "Recommend some science fiction books." called ``recommend_books`` with a
``min_rating`` of 4 and ``published_after`` 2000, which hide most of what was asked for. A
tool leaves an optional parameter the caller does not set to its own default, which is what
a user who said nothing of it asked for, so such an argument is taken out of the call
(benchmarks/README.md, "Optional arguments no message states").

Only numbers are judged: a string option is often a word the message implies ("celsius"
for a question asked in degrees Celsius), and a number is plainly there or not. A number
counts as stated when a message (or an earlier call or a tool's result) writes it in
digits or in an English word up to nineteen, as it is, as a percentage for a fraction
("6.5%" for 0.065) or in another unit ("2 hours" for 120 minutes). Where a message may
state a number in a way this does not read (a numeral other than a digit as in "1万円", a
Korean or Japanese number word, "twenty-five": ``stated_numbers.stated_numbers``), every
value is kept. Kept as well: 0 and 1 (for "none" and "a"), and the parameter's declared
default, which changes nothing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from backend.chat.made_up_arguments import argument_object
from backend.chat.stated_numbers import stated_numbers, states_value
from backend.protocol.schemas import FunctionCall, ToolDefinition

#: How a stated number turns into the value a parameter takes in its own unit: as it is, a
#: percentage (5 for 0.05 and back), minutes and seconds of hours ("2 hours" for 120),
#: hours of days, days of weeks, months of years, metres of kilometres.
UNIT_FACTORS = (1, 100, 60, 3600, 24, 7, 12, 1000)
#: A default a description gives: "Default is 0.001", "defaults to 5", "(default 10)".
_DEFAULT = re.compile(r"\bdefault(?:s to| is|:)?\s+(-?\d+(?:\.\d+)?)", re.IGNORECASE)


def without_unstated_options(
    call: FunctionCall, tools: Sequence[ToolDefinition], said: str
) -> FunctionCall:
    """``call`` without the optional number arguments that ``said`` (the conversation's
    text, ``made_up_arguments.conversation_text``) does not state."""
    tool = next((t for t in tools if t.function.name == call.name), None)
    arguments = argument_object(call) if tool is not None else None
    if tool is None or arguments is None:
        return call
    schema = tool.function.parameters or {}
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}
    options = {
        name: value
        for name, value in arguments.items()
        if name not in required
        and _is_number(value)
        and value not in (0, 1)
        and not _is_default(value, properties.get(name))
    }
    # The conversation is read only for a call that has such an option: most have none.
    stated = stated_numbers(said) if options else None
    if stated is None:
        return call
    unstated = [
        name
        for name, value in options.items()
        if not any(states_value(n, value, UNIT_FACTORS) for n in stated)
    ]
    if not unstated:
        return call
    kept = {name: value for name, value in arguments.items() if name not in unstated}
    return call.model_copy(update={"arguments": json.dumps(kept, ensure_ascii=False)})


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_default(value: float, schema: Any) -> bool:
    """Whether ``value`` is the parameter's declared default: its JSON Schema ``default``,
    or a number its description gives after "default" ("Default is 0.001")."""
    if not isinstance(schema, dict):
        return False
    if _is_number(schema.get("default")):
        return math.isclose(value, schema["default"], rel_tol=1e-9)
    description = str(schema.get("description", ""))
    found = _DEFAULT.search(description)
    return found is not None and math.isclose(value, float(found[1]), rel_tol=1e-9)
