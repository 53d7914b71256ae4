"""Each notebook's time budget under nbmake (``make test``): its ``execution.timeout``
metadata bounds every cell (nbmake) and, here, the whole notebook (pytest-timeout)."""

from __future__ import annotations

import json

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix != ".ipynb":
            continue
        metadata = json.loads(item.path.read_text(encoding="utf-8"))["metadata"]
        budget = metadata.get("execution", {}).get("timeout")
        if budget:
            item.add_marker(pytest.mark.timeout(budget))
