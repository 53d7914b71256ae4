"""Lists of numbers typed without a space after the comma, spaced in the prompts of a request
that offers tools.

Asked how much $5,000 grows to "after 3,7 and 15 years", the 1.5B model called
``compound_interest`` with ``years`` 37 and 15: it takes every comma between digits for a
thousands separator, which JSON numbers drop. With a space after the comma ("3, 7 and 15") it
makes the three calls (benchmarks/README.md, "Lists of numbers typed without spaces"). A comma
between digits separates thousands only when exactly three digits follow it ("$5,000",
"1,234,567"); any other ("3,7", "1990,2005") separates a list's items, and gets its space. A
decimal comma ("3,5 kg" for 3.5) reads as a list too: the model made it 35 before, and is not
helped here.
"""

from __future__ import annotations

import re

#: A comma between digits that does not separate thousands: its digits after are not three.
_LIST_COMMA = re.compile(r"(?<=\d),(?=(?:\d{1,2}|\d{4,})(?!\d))")


def spaced_number_lists(text: str) -> str:
    """``text`` with a space after each comma that separates numbers of a list."""
    return _LIST_COMMA.sub(", ", text)
