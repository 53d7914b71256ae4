"""The in-process backend the adapters share: one per engine settings, counted by handles, so
closing one adapter never breaks another and the models are freed with the last handle."""

from __future__ import annotations

import gc
import time

import pytest

from backend.backends.local import EngineConfig, InProcessBackend
from backend.backends.local.shared import SharedBackends
from backend.testing import CharCountEmbeddingEngine, ScriptedChatEngine, offline_backend

CHAT = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}]}


class TrackedBackend(InProcessBackend):
    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


@pytest.fixture
def shared():
    def build(config: EngineConfig) -> TrackedBackend:
        return TrackedBackend(
            config,
            chat_engine_instance=ScriptedChatEngine("ok"),
            embedding_engine_instance=CharCountEmbeddingEngine(),
        )

    return SharedBackends(build)


def test_one_backend_per_settings_and_closing_one_handle_leaves_the_others_working(shared):
    small, other = EngineConfig.from_env(profile="small"), EngineConfig.from_env(profile="default")
    first, second = shared.acquire(small), shared.acquire(small)
    assert first.inner is second.inner and shared.holders(small) == 2
    assert shared.acquire(other).inner is not first.inner
    first.close()
    first.close()  # a second close of the same handle gives up nothing more
    assert shared.holders(small) == 1
    assert second.chat(CHAT).choices[0].message.content == "ok"
    assert not first.inner.closed
    second.close()
    assert shared.holders(small) == 0 and first.inner.closed
    third = shared.acquire(small)  # a new backend after the last one was freed
    assert third.inner is not first.inner and third.chat(CHAT).choices[0].message.content == "ok"


def test_a_handle_dropped_unclosed_gives_up_its_reference(shared):
    config = EngineConfig.from_env(profile="small")
    kept = shared.acquire(config)
    dropped = shared.acquire(config)
    del dropped
    gc.collect()
    deadline = time.monotonic() + 5
    while shared.holders(config) != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert shared.holders(config) == 1
    assert kept.chat(CHAT).choices[0].message.content == "ok"


def test_adapters_hold_their_own_handles(monkeypatch):
    from langchain_core_ext import ChatCore, CoreEmbeddings
    from llamaindex_core_ext import Core

    registry = SharedBackends(lambda config: offline_backend(ScriptedChatEngine("ok")))
    monkeypatch.setattr("backend.backends.local.shared._SHARED", registry)
    lc_chat, lc_embeddings, li_chat = ChatCore(), CoreEmbeddings(), Core()
    handles = [lc_chat._get_backend(), lc_embeddings._get_backend(), li_chat.get_backend()]
    assert len({id(handle.inner) for handle in handles}) == 1
    config = EngineConfig.from_env()
    assert registry.holders(config) == 3
    lc_chat.close()
    li_chat.close()
    assert registry.holders(config) == 1
    assert lc_embeddings.embed_query("abc") == pytest.approx(
        offline_backend()
        .embed({"model": "core-embedding-1-large-query", "input": "abc"})
        .float_vectors()[0]
    )
    assert isinstance(handles[1].inner._embedding.get(), CharCountEmbeddingEngine)


def test_models_stay_loaded_when_the_last_handle_is_dropped_unclosed(shared):
    # Adapters built where they are used (``ChatCore().invoke(...)`` in a function) are
    # dropped at once: the next one must find the models loaded, not load them again.
    config = EngineConfig.from_env(profile="small")
    dropped = shared.acquire(config)
    inner = dropped.inner
    del dropped
    gc.collect()
    deadline = time.monotonic() + 5
    while shared.holders(config) != 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert shared.holders(config) == 0 and not inner.closed
    again = shared.acquire(config)
    assert again.inner is inner
    again.close()  # an explicit close of the last handle frees the models
    assert inner.closed and shared.holders(config) == 0
