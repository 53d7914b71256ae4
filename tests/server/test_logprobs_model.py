"""Log-probabilities on the real small model, in-process and through the real server (the
``service`` fixture runs each test on both), and read by the official ``openai`` SDK.

The streamed and whole answers are two generations of the same request on the session's
shared backend, late in the suite: they read the same tokens and the very same numbers, since
a request that runs alone reads what a fresh engine reads, whatever ran before it
(``backend.engines.llamacpp_runner``; before that layout CI runs read one token at 0.51 in
one answer and 0.45 in the other).
"""

from __future__ import annotations

import json
import math

import pytest

from tests.server.helpers import API_KEY
from tests.tools import WEATHER

pytestmark = pytest.mark.model

#: Float32 rounding: the top 20 probabilities of a near-certain token can sum to 1 + 1e-7.
ROUNDING = 1e-6
ASK = {
    "model": "core-1-mini-chat",
    "messages": [{"role": "user", "content": "Say good morning in Japanese, then in French."}],
    "temperature": 0,
    "max_tokens": 24,
    "logprobs": True,
    "top_logprobs": 5,
}


def _entries(chunks) -> list:
    return [
        e
        for c in chunks
        if c.choices and c.choices[0].logprobs
        for e in c.choices[0].logprobs.content
    ]


def _spelled(entries) -> str:
    return b"".join(bytes(entry.bytes) for entry in entries).decode("utf-8")


def _assert_greedy(entries, top_n: int) -> None:
    """Each token is the first of its alternatives (``top_n`` of them, fewer where a grammar
    allowed fewer)."""
    for entry in entries:
        assert 1 <= len(entry.top_logprobs) <= top_n
        assert (entry.top_logprobs[0].token, entry.top_logprobs[0].bytes) == (
            entry.token,
            entry.bytes,
        )
        assert entry.top_logprobs[0].logprob == entry.logprob <= 0
        assert entry.token == bytes(entry.bytes).decode("utf-8", errors="replace")


def test_greedy_tokens_are_their_top_entry_and_spell_the_answer(service):
    choice = service.chat(ASK).choices[0]
    entries = choice.logprobs.content
    assert len(entries) > 5 and any(len(e.bytes) > len(e.token) for e in entries)  # Japanese
    _assert_greedy(entries, top_n=5)
    assert all(len(entry.top_logprobs) == 5 for entry in entries)
    assert _spelled(entries) == choice.message.content


def test_each_positions_top_probabilities_sum_to_at_most_one(service):
    request = {**ASK, "top_logprobs": 20, "temperature": 1.5, "seed": 7}
    entries = service.chat(request).choices[0].logprobs.content
    for entry in entries:
        assert sum(math.exp(top.logprob) for top in entry.top_logprobs) <= 1 + ROUNDING
        # the numbers are the model's, before temperature: a sampled token ranks where it is
        assert entry.logprob <= entry.top_logprobs[0].logprob
        if entry.logprob >= entry.top_logprobs[-1].logprob:
            assert entry.token in [top.token for top in entry.top_logprobs]


def _stream(service) -> tuple[list, list]:
    with service.stream_chat(ASK) as stream:
        chunks = list(stream)
    return chunks, _entries(chunks)


def test_each_streamed_chunk_carries_the_entries_of_its_delta(service):
    chunks, streamed = _stream(service)
    _assert_greedy(streamed, top_n=5)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert _spelled(streamed) == content
    for chunk in chunks[1:]:  # each chunk: the entries of the tokens behind its delta
        choice = chunk.choices[0]
        if choice.delta.content:
            assert _spelled(choice.logprobs.content) == choice.delta.content


def test_streamed_entries_equal_the_whole_answers(service):
    whole = service.chat(ASK).choices[0].logprobs.content
    _, streamed = _stream(service)
    assert [e.model_dump() for e in streamed] == [e.model_dump() for e in whole]


def test_constrained_output_lists_only_what_the_grammar_allows(service):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    request = {
        **ASK,
        "messages": [{"role": "user", "content": "Which city is the Eiffel Tower in?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
    }
    choice = service.chat(request).choices[0]
    entries = choice.logprobs.content
    json.loads(choice.message.content)
    _assert_greedy(entries, top_n=5)
    assert all(top.token.startswith("{") for top in entries[0].top_logprobs)
    assert _spelled(entries) == choice.message.content


def test_a_tool_call_reply_carries_the_entries_of_its_call(service):
    request = {
        **ASK,
        "messages": [{"role": "user", "content": "What is the weather in Paris right now?"}],
        "tools": [WEATHER],
        "max_tokens": 64,
    }
    choice = service.chat(request).choices[0]
    assert choice.message.content is None and choice.message.tool_calls
    assert "Paris" in _spelled(choice.logprobs.content)
    with service.stream_chat(request) as stream:
        assert [e.token for e in _entries(stream)] == [e.token for e in choice.logprobs.content]


def test_tokens_cut_by_a_stop_sequence_are_not_sent(service):
    """The stop is a token the unstopped answer reads at a token boundary, chosen from that
    answer: which words the model says differs between CPUs (one counted "1, 2, 3", another
    explained how to count), the cut must not."""
    whole = service.chat(ASK).choices[0]
    text = whole.message.content
    starts = [len(_spelled(whole.logprobs.content[:i])) for i in range(len(whole.logprobs.content))]
    cut, stop = next(
        (start, entry.token)
        for start, entry in zip(starts, whole.logprobs.content, strict=True)
        if start > 0 and entry.token.strip() and text.find(entry.token) == start
    )
    choice = service.chat({**ASK, "stop": [stop]}).choices[0]
    assert choice.message.content == text[:cut] and choice.finish_reason == "stop"
    assert _spelled(choice.logprobs.content) == choice.message.content


def test_the_openai_sdk_reads_them_from_the_server(real_server):
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=f"{real_server.url}/v1/core", api_key=API_KEY) as client:
        response = client.chat.completions.create(**ASK)
        with client.chat.completions.create(**ASK, stream=True) as stream:
            streamed = [
                e
                for c in stream
                if c.choices and c.choices[0].logprobs
                for e in c.choices[0].logprobs.content
            ]
    entries = response.choices[0].logprobs.content
    assert entries[0].top_logprobs[0].token == entries[0].token
    assert len(entries[0].top_logprobs) == 5 and isinstance(
        entries[0].top_logprobs[1].logprob, float
    )
    assert [e.token for e in streamed] == [e.token for e in entries]
