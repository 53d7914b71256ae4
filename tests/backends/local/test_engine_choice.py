"""The chat engine *choice* (``chat_engine=``: auto, llama.cpp or transformers, as
``CORE_CHAT_ENGINE``) and a ready engine *object* (``chat_engine_instance=``) are two keywords
everywhere, used as a new user would: ``backend.connect``, ``InProcessBackend``, the
adapters' settings and the command line. A wrong type or value is refused at construction,
naming the accepted values, never deep inside the first request."""

from __future__ import annotations

import pytest

import backend
from backend import cli
from backend.backends.local import InProcessBackend
from backend.testing import scripted_backend
from backend.testing.engines import CharCountEmbeddingEngine, EchoChatEngine

ACCEPTED = "auto, llama.cpp, transformers"
HELLO = {
    "model": "core-1-mini-chat",
    "messages": [{"role": "user", "content": "Say hello."}],
    "max_tokens": 4,
    "temperature": 0,
}


def test_connect_runs_the_chosen_engine():
    """The keyword connect()'s docstring documents: the transformers engine answers."""
    with backend.connect(profile="small", chat_engine="transformers") as service:
        reply = service.chat(HELLO)
        assert reply.choices[0].message.content
        assert type(service._chat.get()).__name__ == "TransformersChatEngine"


@pytest.mark.parametrize(
    ("value", "error"),
    [("vllm", ValueError), ("Transformers", ValueError), (EchoChatEngine(), TypeError)],
)
def test_connect_refuses_an_unknown_choice_at_once(value, error):
    with pytest.raises(error, match=f"chat engine.*{ACCEPTED}|chat_engine is one of {ACCEPTED}"):
        backend.connect(profile="small", chat_engine=value)


def test_an_engine_object_goes_to_its_own_keyword():
    engine = EchoChatEngine()
    service = InProcessBackend(
        chat_engine_instance=engine, embedding_engine_instance=CharCountEmbeddingEngine()
    )
    assert service._chat.get() is engine
    assert service.config.chat_engine == "auto"  # the choice is untouched


def test_a_choice_passed_as_the_engine_object_is_refused_with_the_right_keyword():
    with pytest.raises(
        TypeError, match=f"chat_engine_instance takes a ready ChatEngine.*{ACCEPTED}"
    ):
        InProcessBackend(chat_engine_instance="transformers")
    with pytest.raises(TypeError, match="embedding_engine_instance takes a ready EmbeddingEngine"):
        InProcessBackend(embedding_engine_instance="multilingual-e5-small")


def test_the_old_object_keyword_is_refused_with_the_new_one_named():
    with pytest.raises(TypeError, match="embedding_engine_instance"):
        InProcessBackend(embedding_engine=CharCountEmbeddingEngine())


def test_the_adapters_take_the_choice_and_refuse_others():
    from langchain_core_ext import ChatCore
    from llamaindex_core_ext import Core

    for adapter in (ChatCore, Core):
        with pytest.raises(ValueError, match=ACCEPTED):
            adapter(chat_engine="vllm")
        with pytest.raises(ValueError, match=ACCEPTED):
            adapter(chat_engine=EchoChatEngine())
    llm = ChatCore(chat_engine="transformers")
    try:
        shared = llm._get_backend()  # a handle on the shared backend; nothing loaded yet
        assert shared.inner.config.chat_engine == "transformers"
    finally:
        llm.close()


def test_the_command_line_takes_the_choice(monkeypatch: pytest.MonkeyPatch):
    calls = []

    def connect(**options):
        calls.append(options)
        return scripted_backend("Hi.")

    monkeypatch.setattr(cli, "connect", connect)
    argv = ["chat", "hi", "--no-stream", "--profile", "small", "--chat-engine", "transformers"]
    assert cli.main(argv) == 0
    assert calls == [{"api_key": None, "profile": "small", "chat_engine": "transformers"}]


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "hi", "--chat-engine", "vllm"],
        ["chat", "hi", "--chat-engine", "transformers", "--engine-url", "http://e/v1"],
        ["chat", "hi", "--chat-engine", "transformers", "--base-url", "http://s"],
    ],
)
def test_the_command_line_refuses_a_choice_it_would_not_use(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2
    assert "--chat-engine" in capsys.readouterr().err
