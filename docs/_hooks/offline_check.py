"""MkDocs hook: the built site must read offline. After the build, every HTML and CSS file is
searched for anything the browser would fetch from another host (a script, stylesheet, font,
image, frame or CSS ``url()``/``@import`` on http(s)://); one found fails the build. Links the
reader may click (``<a href>``) are allowed."""

from __future__ import annotations

import re
from pathlib import Path

# Attributes whose URL the browser loads by itself, in the tags that load them.
_FETCHED = re.compile(
    r"<(?:script|link|img|iframe|source|video|audio|embed|object)\b[^>]*?"
    r"\b(?:src|href|data|srcset)\s*=\s*[\"']?\s*((?:https?:)?//[^\"'\s>]+)",
    re.IGNORECASE,
)
_CSS_FETCHED = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"'])((?:https?:)?//[^\"')\s]+)", re.I)


def remote_fetches(site_dir: Path) -> list[str]:
    """``file: url`` for everything under ``site_dir`` that a browser would fetch off-site."""
    found = []
    for path in sorted(site_dir.rglob("*")):
        if path.suffix not in (".html", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        patterns = (_FETCHED, _CSS_FETCHED) if path.suffix == ".html" else (_CSS_FETCHED,)
        for pattern in patterns:
            for match in pattern.finditer(text):
                found.append(f"{path.relative_to(site_dir)}: {match.group(1)}")
    return found


def on_post_build(config) -> None:
    # imported here: the suite tests remote_fetches in a venv without the docs extra
    from mkdocs.exceptions import PluginError

    found = remote_fetches(Path(config["site_dir"]))
    if found:
        raise PluginError(
            "the site would fetch from other hosts (it must read offline):\n  "
            + "\n  ".join(found[:20])
        )
