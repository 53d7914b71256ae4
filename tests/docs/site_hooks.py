"""The site's build hooks (docs/_hooks/), loaded by file path as mkdocs loads them: they
are scripts beside the pages, not a package."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.docs.markdown_examples import ROOT


def load_site_hook(name: str) -> ModuleType:
    """docs/_hooks/<name>.py, freshly loaded."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "_hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
