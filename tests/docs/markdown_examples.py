"""The Python examples of the documentation: every ```python block of README.md and of the
pages under docs/, found the way a reader sees them.

A block is skipped only when the line before its fence is an HTML comment giving the reason,
``<!-- not run: needs a GPU -->``, which the site does not show; every other block runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_OPEN = re.compile(r"^```python\s*$")
_CLOSE = re.compile(r"^```\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Example:
    path: Path
    line: int  # of the first line of code
    code: str
    not_run: str | None  # the reason, for a block marked not to run

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documentation_pages() -> list[Path]:
    """README.md and the site's own pages (not its build hooks)."""
    pages = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)
    return [ROOT / "README.md", *pages]


def examples(path: Path) -> list[Example]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        if not _OPEN.match(lines[index]):
            index += 1
            continue
        before = next((line.strip() for line in reversed(lines[:index]) if line.strip()), "")
        marker = _NOT_RUN.match(before)
        end = next(i for i in range(index + 1, len(lines)) if _CLOSE.match(lines[i]))
        code = "\n".join(lines[index + 1 : end]) + "\n"
        found.append(Example(path, index + 2, code, marker.group(1) if marker else None))
        index = end + 1
    return found
