"""Fixtures of the reliability suite: servers on the echo fakes, and the figures it reports.

Everything runs on fake engines over loopback: the echo engine answers from the request, so
every answer can be checked against its own request. The figures (fuzz cases, 5xx seen, load
counts, memory, drain time) are printed after the run and, when ``CORE_RELIABILITY_FIGURES``
names a file, written there as JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from backend.testing import EchoChatEngine, offline_backend
from backend.testing.servers import RunningServer, running_server

FIGURES_ENV = "CORE_RELIABILITY_FIGURES"
_FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="session")
def figures() -> dict[str, Any]:
    """Figures the tests measured, reported at the end of the run."""
    return _FIGURES


@pytest.fixture(scope="module")
def echo_server() -> Iterator[RunningServer]:
    """One server on the echo fakes for a whole module (tests that leave its state alone)."""
    with running_server(offline_backend(EchoChatEngine())) as running:
        yield running


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("reliability figures")
    for name, value in sorted(_FIGURES.items()):
        terminalreporter.write_line(f"{name}: {value}")
    path = os.environ.get(FIGURES_ENV)
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(_FIGURES, out, indent=2, sort_keys=True)
