"""``response_format``: JSON answers as grammar constraints, and the schemas they can follow.

``json_object`` answers are one JSON object, ``json_schema`` answers validate against the
schema: both are generated under a ``JSONSchemaConstraint`` (``backend.engines.token_mask``),
so they parse by construction rather than by asking nicely. A schema is checked here before
anything runs: a keyword the grammar cannot enforce is refused with a 400 naming it, because
an answer generated without it could break the schema the caller relies on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from backend.engines.base import JSONSchemaConstraint
from backend.protocol.errors import BadRequestError
from backend.protocol.schemas import ResponseFormat

#: What the grammar enforces (xgrammar's JSON Schema converter), and annotations that need
#: no enforcing. ``format`` is an annotation in JSON Schema: validators do not assert it.
ENFORCED = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems",
        "minItems", "maxItems", "enum", "const", "anyOf", "$ref", "$defs", "definitions",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
        "maxLength", "pattern", "minProperties", "maxProperties",
    }
)  # fmt: skip
ANNOTATIONS = frozenset(
    {
        "title", "description", "default", "examples", "$schema", "$id", "$comment",
        "deprecated", "readOnly", "writeOnly", "format", "nullable", "discriminator",
    }
)  # fmt: skip
_NAMED_SCHEMAS = ("properties", "$defs", "definitions")  # name -> schema maps
_SCHEMA_LISTS = ("anyOf", "prefixItems")
#: xgrammar prefixes its messages with a time and a source position.
_XGRAMMAR_PREFIX = re.compile(r"^\[[^\]]*\]\s*\S+:\d+:\s*")

#: JSON answers are laid out as the models write JSON unasked: a member per line, two spaces
#: per level. Forced onto one line (off the layout they learned), the 0.5B model sampled at
#: 0.7 sometimes closed the object before the members the prompt asked for (figures in
#: benchmarks/README.md). Tool calls stay on one line: the chat templates write them so.
ANSWER_INDENT = 2

#: ``json_object``: one object with at least one member. The grammar forbids the opening the
#: model prefers (a fence), and at temperature 0.7 the mass left then closed the object at
#: once in 6 of 60 sampled answers (on one line): an empty object answers nothing.
JSON_OBJECT = JSONSchemaConstraint(
    json.dumps({"type": "object", "minProperties": 1}), strict=False, indent=ANSWER_INDENT
)


def _unsupported(schema: Any, path: str) -> Iterator[str]:
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key not in ENFORCED and key not in ANNOTATIONS:
            yield f"{key!r} (at {path})"
        elif key in _NAMED_SCHEMAS and isinstance(value, dict):
            for name, inner in value.items():
                yield from _unsupported(inner, f"{path}/{key}/{name}")
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for i, inner in enumerate(value):
                yield from _unsupported(inner, f"{path}/{key}/{i}")
        elif key in ("items", "additionalProperties"):
            yield from _unsupported(value, f"{path}/{key}")


def format_constraint(response_format: ResponseFormat | None) -> JSONSchemaConstraint | None:
    """The constraint answers to ``response_format`` are generated under; None for text.

    Raises:
        BadRequestError: the schema uses a keyword the grammar cannot enforce, or is not one
            the grammar compiler accepts.
    """
    if response_format is None or response_format.type == "text":
        return None
    if response_format.type == "json_object":
        return JSON_OBJECT
    schema = response_format.json_schema.schema_ or {"type": "object"}
    unsupported = list(_unsupported(schema, "#"))
    if unsupported:
        raise BadRequestError(
            "invalid request: response_format.json_schema uses what constrained decoding "
            f"cannot enforce: {', '.join(unsupported)}; supported keywords: "
            f"{', '.join(sorted(ENFORCED))}",
            param="response_format",
        )
    constraint = JSONSchemaConstraint(json.dumps(schema, ensure_ascii=False), indent=ANSWER_INDENT)
    _check_compiles(constraint)
    return constraint


def _check_compiles(constraint: JSONSchemaConstraint) -> None:
    try:
        import xgrammar
    except ImportError:  # the engines say so when asked to constrain (supports_constraints)
        return
    try:
        xgrammar.Grammar.from_json_schema(constraint.schema_json, strict_mode=constraint.strict)
    except RuntimeError as error:
        reason = _XGRAMMAR_PREFIX.sub("", str(error).strip())
        raise BadRequestError(
            f"invalid request: response_format.json_schema cannot be used: {reason}",
            param="response_format",
        ) from error
