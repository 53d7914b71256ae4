"""Calls that wait for the lookup written beside them in the same reply.

Asked for Lena Fischer's manager's full name, the 1.5B model, given her id ``E-318``, wrote
``get_manager_id("E-318")`` and ``get_employee_name("E-318")`` in one reply: the name was
asked for E-318 herself, not for the manager the first call finds, and the answer gave the
manager's id. A tool named for an id (``get_manager_id``, ``find_customer_id``) finds a new
id from what it is given; a call beside it that gives the same code to another tool asks
about where the lookup starts, while a question that needs the lookup is about what it
finds. So that call is dropped: the lookup is made, and the model calls again with its
result, or answers from it.

Codes only (a letter and a digit, such as ``E-318``): names and numbers given to two tools
are left alone. Calls that read the same code where no tool named for an id is called
beside them (a name and an email for ``E-245``) are all kept, and so is a call beside a
lookup that takes another code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.chat.next_in_chain import scalars
from backend.chat.parameter_kinds import ID_PARAMETER
from backend.chat.repeated_calls import parsed_arguments
from backend.protocol.schemas import ToolCall

_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")


def waiting_for_lookup(calls: Sequence[ToolCall]) -> list[bool]:
    """For each of a reply's ``calls``, whether it gives a code to a tool not named for an
    id while another call of the reply gives that code to a tool named for one."""
    codes = [_codes(call) for call in calls]
    lookups = [ID_PARAMETER.search(call.function.name) is not None for call in calls]
    return [
        not lookups[i]
        and any(lookups[j] and codes[i] & codes[j] for j in range(len(calls)) if j != i)
        for i in range(len(calls))
    ]


def _codes(call: ToolCall) -> set[str]:
    """The codes among ``call``'s argument values, casefolded."""
    values = (v for v in scalars(parsed_arguments(call.function.arguments)) if isinstance(v, str))
    return {v.strip().casefold() for v in values if _LETTER.search(v) and _DIGIT.search(v)}
