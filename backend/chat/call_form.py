"""The constrained call generated in the form the model opened it in.

With ``tool_choice`` ``auto`` the answer starts freely and, once its opening shows a call
(``backend.chat.tool_calls.opens_tool_call``), the call is generated again under the tools'
schemas (``backend.chat.generation``). From the call prompt as the template asks for it (the
tag and a line break, then the call on one line) the small models' likeliest token is the end
of the turn, and the grammar, not the model, then draws the first tool: a user's request for
comedy films in Chicago was called ``find_hotels``, though the free opening had written
``search_movies``. Their free openings are mostly a ```json fence holding an indented array,
and from that fence, laid out as they lay it out, the constrained call names the tool they
opened with (benchmarks/README.md, "The call in the form the model opened it in").

So the call continues the model's own opening: the text it wrote before the JSON (a fence
line, the tag, or nothing) is the call's prefill, and the JSON is laid out with the indent its
first line break shows (none where it wrote on one line).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from backend.chat.prompt import Generation

#: A JSON value's opening bracket, then a line break and the first level's indent.
_INDENTED = re.compile(r"[\[{][ \t]*\n( +)\S")


@dataclass(frozen=True)
class CallForm:
    """How a free answer that opens a call lays it out."""

    #: What the answer wrote before the call's JSON: a fence line, the tag, or "".
    opening: str
    #: Spaces per level of the JSON, or None where it is written on one line.
    indent: int | None


def call_form(text: str) -> CallForm | None:
    """The form of the call that ``text``, a free answer's opening, begins; None when no
    JSON value has begun in it."""
    start = next((i for i, c in enumerate(text) if c in "[{"), None)
    if start is None:
        return None
    indented = _INDENTED.match(text, start)
    return CallForm(text[:start].lstrip(), len(indented.group(1)) if indented else None)


def call_in_form(
    tokenizer: Any, answer_ids: list[int], call: Generation, form: CallForm
) -> Generation:
    """``call`` generated from the answer's prompt and ``form``'s opening, with its JSON laid
    out as ``form`` lays it out."""
    assert call.constraint is not None, "a call in a form is a constrained call"
    opening = list(tokenizer.encode(form.opening, add_special_tokens=False))
    constraint = dataclasses.replace(call.constraint, indent=form.indent)
    return dataclasses.replace(
        call, ids=[*answer_ids, *opening], prefill=form.opening, constraint=constraint
    )
