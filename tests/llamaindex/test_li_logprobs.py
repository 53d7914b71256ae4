"""``Core(logprobs=True)``: ``ChatResponse.logprobs`` as the LlamaIndex OpenAI integration
gives them, streamed and not (offline, on the scripted engine, which is certain of each
character it writes)."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llamaindex_core_ext import Core

REPLY = "Oslo."
MESSAGES = [ChatMessage(role="user", content="Capital of Norway?")]


@pytest.mark.parametrize("top", [0, 1])
def test_each_output_token_gets_its_list_and_the_stream_ends_with_the_same(scripted, top):
    backend = scripted(REPLY)
    llm = Core(backend=backend, logprobs=True, top_logprobs=top)

    response = llm.chat(MESSAGES)
    streamed = list(llm.stream_chat(MESSAGES))

    assert backend.requests[0]["logprobs"] is True
    assert backend.requests[0]["top_logprobs"] == top
    # One list per character (the scripted tokens), each the token itself (top 0) or its
    # single most likely alternative, which is the token, at log-probability 0.
    assert [[(p.token, p.logprob, p.bytes) for p in alts] for alts in response.logprobs] == [
        [(c, 0.0, list(c.encode()))] for c in REPLY
    ]
    assert streamed[-1].logprobs == response.logprobs
    assert llm.complete("Capital of Norway?").logprobs == response.logprobs


def test_no_logprobs_unless_asked(scripted):
    backend = scripted(REPLY)
    llm = Core(backend=backend)
    assert llm.chat(MESSAGES).logprobs is None
    assert all(r.logprobs is None for r in llm.stream_chat(MESSAGES))
    assert "logprobs" not in backend.requests[0]
