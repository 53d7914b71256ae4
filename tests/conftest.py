"""Shared fixtures: environment isolation and the real small-profile backend."""

from __future__ import annotations

import os

import pytest

# Variables that change what a backend connects to or loads; tests set what they need.
_ISOLATED = (
    "CORE_BASE_URL",
    "CORE_API_KEY",
    "CORE_API_KEYS",
    "CORE_CHAT_MODEL",
    "CORE_EMBEDDING_MODEL",
    "CORE_DEVICE",
    "CORE_CHAT_ENGINE",
    "CORE_GROUNDEDNESS_ENGINE",
    "CORE_CHAT_THREADS",
    "CORE_CHAT_PARALLEL",
    "CORE_CHAT_DTYPE",
    "CORE_EMBEDDING_DTYPE",
    "CORE_QUERY_PREFIX",
    "CORE_PASSAGE_PREFIX",
)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ISOLATED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CORE_MODEL_PROFILE", "small")


@pytest.fixture(scope="session")
def small_backend():
    """The in-process backend on the small profile, loaded once for the whole run."""
    from backend.inprocess import InProcessBackend

    service = InProcessBackend(profile="small", device=os.environ.get("CORE_TEST_DEVICE"))
    service.warmup()
    yield service
    service.close()
