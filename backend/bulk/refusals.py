"""Rows the service refuses: which values are never sent, and how a refused request of many
rows is split to find the rows it refused.

Both bulk front-ends ask these, so that they agree on what a bad row is: ``BulkRunner``
stops at the first refused row (after keeping the others' results), and
``backend.bulk.ray_data`` writes its message in the row's ``error`` column and goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from backend.protocol.errors import BadRequestError, CoreError

T = TypeVar("T")
R = TypeVar("R")

#: Errors that mean the service refused what was sent (a 400 or 422: an empty string, a text
#: over the token limit), so that other rows sent apart from the refused one may succeed.
#: Any other error (a wrong key or model, a rate limit, the service down) would fail every
#: row alike, so it is raised rather than blamed on rows.
REFUSALS: tuple[type[CoreError], ...] = (BadRequestError,)


def is_text(value: object) -> bool:
    """Whether a bulk front-end sends ``value``: a non-empty string (not None, NaN or '')."""
    return isinstance(value, str) and bool(value)


def send_apart(
    items: Sequence[T], send: Callable[[Sequence[T]], R]
) -> Iterator[tuple[Sequence[T], R | CoreError]]:
    """Send ``items`` in one request; when the service refuses a request of several, send its
    halves apart, and so on down to single items, so that the refused items are found in a
    few requests (about two per halving) and every other item is still sent.

    Yields ``(items, result)`` for each request that succeeded and ``(one item, error)`` for
    each item refused (``REFUSALS``), in input order; other errors raise. It is lazy: a caller
    that stops at the first refusal sends nothing after it.
    """
    refusal: CoreError | None = None
    try:
        result = send(items)
    except REFUSALS as error:
        refusal = error
    if refusal is None:
        yield items, result
    elif len(items) == 1:
        yield items, refusal
    else:
        half = len(items) // 2
        yield from send_apart(items[:half], send)
        yield from send_apart(items[half:], send)
