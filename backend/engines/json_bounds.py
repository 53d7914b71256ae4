"""Bounds that make JSON generated under a grammar end, at any temperature, without max_tokens.

A grammar keeps output valid, not short: sampled at temperature, a small model can repeat
itself inside a JSON string that never closes until the context (32k tokens) is full, and a
grammar allows endless array items, object members and digits too. So constrained output
has these bounds, in characters of the generated JSON text:

- a string that has run ``string_chars`` is closed: its next token must be one that starts
  with the closing quote (where the grammar allows one);
- so is a string that repeats itself: one ending in at least three copies of a piece, the
  copies ``REPEAT_BYTES`` long or more together (a model in a loop, which at 20 tokens a second
  would otherwise take the string bound's 10 s or more to reach it, each string again);
- a number that has run ``NUMBER_CHARS`` is ended: its next token must not continue it;
- once the whole value has run ``total_chars``, it is wound up: each next token closes the
  open string, array or object where the grammar allows, else ends the scalar being written,
  so the remaining required members get the shortest values the schema allows;
- so is an array of calls that has ``items`` objects, where the constraint sets it
  (``call_constraint``): a model inventing values can list calls without end, each different
  (the 1.5B model called ``cell_divide`` for cell "1", "2", "3"... when asked for a restaurant,
  about 2,500 tokens until ``total_chars``: benchmarks/README.md);
- so is a value that repeats itself outside strings: items or members written again and
  again, the text before a comma ending in ``VALUE_REPEAT_COPIES`` copies of a piece of
  ``VALUE_REPEAT_PIECE`` bytes or more, ``VALUE_REPEAT_BYTES`` or more together (a 0.5B model
  at temperature 0.7 listed the same six skills, or wrote the same review sentence as an
  array item, until ``max_tokens`` cut the JSON: benchmarks/README.md).

The answer stays valid against the caller's schema, which is not changed: the bounds only
narrow the choice among the tokens the grammar allows. An answer that reached a bound ends
with ``finish_reason`` "length", as one cut by ``max_tokens`` does, so a caller can tell a
value that was cut short. A schema's own ``maxLength`` above the string bound raises both
bounds (for every string of the schema: the masks do not know which schema node a string
belongs to). Why not ``maxLength`` in the grammar: xgrammar 0.2.8 compiles a bounded string
without escapes (no newline, quote or backslash could be written), and compiles it slowly
(benchmarks/README.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: A string's characters before it is closed: long for a name, a sentence or a paragraph, and
#: about 250 tokens of a model repeating itself.
STRING_CHARS = 1000
#: The whole value's characters before it is wound up.
TOTAL_CHARS = 8000
#: A number's characters before it is ended: more than a float64 or an int64 needs.
NUMBER_CHARS = 32
#: A string ending in ``REPEAT_COPIES`` copies of a piece (of at most ``REPEAT_PIECE`` bytes)
#: that together run ``REPEAT_BYTES`` bytes or more is a loop: "ha ha ha" is not one, a
#: sentence written three times is.
REPEAT_COPIES = 3
REPEAT_BYTES = 64
REPEAT_PIECE = 256
#: The same outside strings, at a comma: a piece (an item, a member, a cycle of them) of at
#: least ``VALUE_REPEAT_PIECE`` bytes, so runs of equal short numbers are no loop, and at most
#: ``VALUE_REPEAT_PIECE_MAX``; four copies, since equal objects in a list can be real data.
VALUE_REPEAT_COPIES = 4
VALUE_REPEAT_BYTES = 128
VALUE_REPEAT_PIECE = 16
VALUE_REPEAT_PIECE_MAX = 512

_QUOTE, _BACKSLASH, _COMMA = 0x22, 0x5C, 0x2C
_OBJECT, _ARRAY, _CLOSERS = 0x7B, 0x5B, frozenset(b"}]")
_NUMBER_BYTES = frozenset(b"0123456789.eE+-")
#: Bytes that, outside strings, lay out JSON's structure rather than write a value.
_STRUCTURE_BYTES = frozenset(b"{}[],: \t\n\r")


@dataclass(frozen=True)
class JSONBounds:
    string_chars: int = STRING_CHARS
    total_chars: int = TOTAL_CHARS
    #: Objects closed directly inside a top-level array before it is wound up; None: no bound.
    items: int | None = None

    @classmethod
    def for_schema(cls, schema: Any) -> JSONBounds:
        """The bounds for output under ``schema``: the defaults, raised by its own longest
        ``maxLength``."""
        longest = max(_max_lengths(schema), default=0)
        if longest <= STRING_CHARS:
            return cls()
        return cls(longest, TOTAL_CHARS + longest - STRING_CHARS)


def _max_lengths(schema: Any) -> Iterator[int]:
    if isinstance(schema, dict):
        length = schema.get("maxLength")
        if isinstance(length, int) and not isinstance(length, bool):
            yield length
        for value in schema.values():
            yield from _max_lengths(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _max_lengths(value)


class JSONScanner:
    """Follows generated JSON text, given as UTF-8 bytes in pieces (tokens): whether a string
    is open and how far it and the whole text have run, in characters (escapes count as
    written), and whether that string, or the next one, is a member's name. ``reached``: a
    bound was reached at some point."""

    def __init__(self, bounds: JSONBounds) -> None:
        self.bounds = bounds
        self.in_string = False
        self.escaped = False  # the last byte began an escape inside a string
        self.string_chars = 0
        self._string = bytearray()  # the open string's bytes so far
        self.repeating = False  # the open string ends in a loop
        self.number_chars = 0  # of the number being written, outside strings
        self.total_chars = 0
        self._text = bytearray()  # everything so far
        self.value_repeating = False  # items or members written in a loop
        self.reached = False
        self._containers = bytearray()  # the open objects and arrays, innermost last
        self.name_next = False  # the next string opened is a member's name
        self.in_name = False  # the open string is a member's name
        self.strings_opened = 0  # how many strings have been opened so far
        self.items_closed = 0  # objects closed directly inside a top-level array

    def feed(self, data: bytes) -> JSONScanner:
        for byte in data:
            if self.in_string:
                self._string.append(byte)
                # Once looping, the string stays so until it closes.
                self.repeating = self.repeating or _ends_in_a_loop(self._string)
            elif byte == _COMMA and not self.value_repeating:
                # The text before this comma (checked before it is appended: no copy).
                self.value_repeating = _ends_in_a_loop(
                    self._text,
                    VALUE_REPEAT_COPIES,
                    VALUE_REPEAT_BYTES,
                    VALUE_REPEAT_PIECE,
                    VALUE_REPEAT_PIECE_MAX,
                )
            self._text.append(byte)
            if byte & 0xC0 == 0x80:  # a UTF-8 continuation byte: the same character
                continue
            self.total_chars += 1
            if not self.in_string:
                self.number_chars = self.number_chars + 1 if byte in _NUMBER_BYTES else 0
                if byte == _QUOTE:
                    self.strings_opened += 1
                    self.in_string, self.string_chars, self.repeating = True, 0, False
                    self.in_name, self.name_next = self.name_next, False
                    self._string.clear()
                else:
                    self._follow_structure(byte)
            elif self.escaped:
                self.escaped = False
                self.string_chars += 1
            elif byte == _QUOTE:
                self.in_string = self.in_name = False
                self._string.clear()
            else:
                self.escaped = byte == _BACKSLASH
                self.string_chars += 1
            if self.string_chars >= self.bounds.string_chars or self.number_full or self.winding_up:
                self.reached = True
            self.reached = self.reached or self.repeating
        return self

    def _follow_structure(self, byte: int) -> None:
        """Keeps the open containers, and whether a member's name comes next: after an
        object's opening brace or a comma between its members."""
        if byte in (_OBJECT, _ARRAY):
            self._containers.append(byte)
            self.name_next = byte == _OBJECT
        elif byte in _CLOSERS:
            if self._containers:
                closed = self._containers.pop()
                if closed == _OBJECT and self._containers == b"[":
                    self.items_closed += 1
            self.name_next = False
        elif byte == _COMMA:
            self.name_next = bool(self._containers) and self._containers[-1] == _OBJECT

    @property
    def string_full(self) -> bool:
        """The open string has run its bound, or is repeating itself, and can be closed now
        (not inside an escape)."""
        if not self.in_string or self.escaped:
            return False
        return self.string_chars >= self.bounds.string_chars or self.repeating

    @property
    def number_full(self) -> bool:
        return self.number_chars >= NUMBER_CHARS

    @property
    def winding_up(self) -> bool:
        items = self.bounds.items
        return (
            self.total_chars >= self.bounds.total_chars
            or self.value_repeating
            or (items is not None and self.items_closed >= items)
        )


def _ends_in_a_loop(
    data: bytearray,
    copies_at_least: int = REPEAT_COPIES,
    together: int = REPEAT_BYTES,
    shortest: int = 1,
    longest: int = REPEAT_PIECE,
) -> bool:
    """Whether ``data`` ends in ``copies_at_least`` or more copies of a piece of ``shortest``
    to ``longest`` bytes, ``together`` bytes or more together. The shortest repeating piece
    decides: copies of a shorter one (``0, 0, 0, ``) are no loop of a longer one."""
    for piece in range(1, min(longest, len(data) // copies_at_least) + 1):
        copies = max(copies_at_least, -(-together // piece))
        if copies * piece > len(data):
            continue
        tail = data[-piece:]
        if data[-copies * piece :] == tail * copies:
            return piece >= shortest
    return False


def reached_bound(text: str, bounds: JSONBounds) -> bool:
    """Whether generated JSON ``text`` reached ``bounds`` (so the masks narrowed its tokens)."""
    return JSONScanner(bounds).feed(text.encode()).reached


def writes_structure(
    piece: bytes, in_string: bool, escaped: bool, in_name: bool = False, name_next: bool = False
) -> bool:
    """Whether a token's bytes, written after text whose state is given (a string open, its
    last byte an escape, that string a member's name, a member's name next), lay out
    structure: open or close an object or array, add an item or member (a comma), name a
    member, or write layout between them. Inside a value's string nothing is structure; that
    string's quotes and the scalars (numbers, ``true``...) are values.

    A constrained answer sampled at a temperature takes such tokens greedily
    (``backend.engines.sampling.choose_token``): how many calls a reply holds, whether an
    object gets another member and what it is named, are the model's most likely choice, not
    a draw (sampled at 0.7, the small model once named a JSON-mode answer's second member
    " punchline": benchmarks/README.md).
    """
    for byte in piece:
        if in_string:
            if in_name:
                return True
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            if name_next:
                return True
            in_string = True
        elif byte in _STRUCTURE_BYTES:
            return True
    return False
