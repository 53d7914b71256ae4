"""README.md is the front door: short, with the two commands, and links into the site that
resolve."""

from __future__ import annotations

import re

from tests.docs.markdown_examples import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_stays_short() -> None:
    # Details belong on the site's pages (docs/), which the README links to.
    assert len(README.splitlines()) <= 150


def test_the_readme_gives_the_two_commands() -> None:
    assert "make serve" in README and "make test" in README


def test_every_relative_link_of_the_readme_resolves() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    relative = [link for link in links if "://" not in link]
    assert relative
    assert [link for link in relative if not (ROOT / link).exists()] == []
