"""Reading a request body as strict JSON, so odd input is a 400 and never reaches the models.

``json.loads`` alone is too lenient and too fragile for a public endpoint:

* it accepts ``NaN``, ``Infinity`` and ``-Infinity``, which RFC 8259 does not; they would
  pass through tool schemas untouched and come back out as invalid JSON;
* it accepts ``\\ud800``-style escapes for lone surrogates, which are no Unicode text: the
  tokenizers and the response encoder fail on them later, as a 500;
* it recurses once per nesting level and raises ``RecursionError`` (a 500) around a thousand
  levels, and nesting just under that still reaches code that recurses further (schemas,
  templates), so nesting is capped well below.
"""

from __future__ import annotations

import json
from typing import Any

from backend.protocol.errors import BadRequestError

#: Deepest nesting of arrays and objects accepted; tool parameter schemas need a few levels.
MAX_JSON_DEPTH = 64


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _too_deep() -> BadRequestError:
    return BadRequestError(
        f"invalid request: the body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep"
    )


def _check_tree(value: Any) -> None:
    """Raise ``BadRequestError`` for nesting deeper than ``MAX_JSON_DEPTH`` or lone surrogates."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # iterative: the point is to survive inputs that break recursion
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise BadRequestError(
                    "invalid request: the body holds a string with an unpaired UTF-16 "
                    "surrogate escape (such as \\ud800), which is not Unicode text"
                ) from exc
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)


def parse_json_body(body: bytes) -> Any:
    """The JSON value of ``body``.

    Raises:
        BadRequestError: empty, not UTF-8, not JSON, ``NaN``/``Infinity``, nested too deeply,
            or holding lone surrogates; the message says which.
    """
    if not body.strip():
        raise BadRequestError("invalid request: the body is empty; send a JSON object")
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise _too_deep() from exc
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise BadRequestError(f"invalid request: the body is not valid JSON ({exc})") from exc
    _check_tree(value)
    return value
