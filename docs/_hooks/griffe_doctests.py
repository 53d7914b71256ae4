"""Griffe extension (mkdocs.yml's mkdocstrings options): doctest lines (``>>>`` and ``...``) in
a docstring's prose or in an ``Example:`` admonition are shown as Python code; Markdown would
read ``>>>`` as nested quotes. An ``Examples:`` section, which griffe parses itself, is left
alone."""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLES = re.compile(r"^(\s*)Examples:\s*$")


def fence_doctests(text: str) -> str:
    out: list[str] = []
    fence_indent: str | None = None  # the open fence's indentation
    examples_indent: str | None = None  # inside an "Examples:" section
    for line in text.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        if examples_indent is not None and line.strip() and len(indent) <= len(examples_indent):
            examples_indent = None
        section = _EXAMPLES.match(line)
        if section:
            examples_indent = section.group(1)
        is_doctest = examples_indent is None and line.lstrip().startswith((">>>", "..."))
        if fence_indent is not None and not (is_doctest and indent == fence_indent):
            out.append(fence_indent + "```")
            fence_indent = None
        if is_doctest and fence_indent is None:
            out.append(indent + "```pycon")
            fence_indent = indent
        out.append(line)
    if fence_indent is not None:
        out.append(fence_indent + "```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
