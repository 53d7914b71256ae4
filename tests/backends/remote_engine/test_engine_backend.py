"""The service in front of a real OpenAI-compatible engine (llama-cpp-python's server on the
embedded small GGUF) and an e5 embeddings engine: chat, streams, tool calls, embeddings and
the groundedness check, compared with the in-process backend on the same weights."""

from __future__ import annotations

import json

import numpy as np
import pytest

from backend.backends.remote_engine.judge_reading import EngineYesNoReading, embedded_chat_tokenizer
from backend.chat.yes_no import YesNoReader
from backend.groundedness.prompts import QUESTIONS, judge_prompt
from backend.protocol.catalogue import GROUNDEDNESS_MODEL, PASSAGE_MODEL, QUERY_MODEL
from backend.protocol.errors import BadRequestError
from backend.testing.engine_servers import p_yes_check, p_yes_gaps_from_clean_caches
from benchmarks.eval.run_eval import load_jsonl
from tests.tools import WEATHER

pytestmark = pytest.mark.model


def _ask(content: str, **fields) -> dict:
    return {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        **fields,
    }


def test_chat_answers_under_the_catalogue_name_with_the_engine_usage(engine_backend):
    reply = engine_backend.chat(_ask("What is the capital of France? One word.", max_tokens=8))
    assert "paris" in reply.choices[0].message.content.lower()
    assert reply.model == "core-1-mini-chat-240502"
    assert reply.usage.prompt_tokens > 10 and 1 <= reply.usage.completion_tokens <= 8


def test_a_stream_keeps_one_id_and_created_and_equals_the_whole_answer(engine_backend):
    request = _ask("Count from 1 to 6, separated by commas.", max_tokens=24)
    whole = engine_backend.chat(request).choices[0].message.content
    with engine_backend.stream_chat(request) as stream:
        chunks = list(stream)
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    assert {c.model for c in chunks} == {"core-1-mini-chat-240502"}
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == whole and len(chunks) > 3
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


async def test_async_chat_and_stream(engine_backend):
    request = _ask("Say hello.", max_tokens=6)
    reply = await engine_backend.achat(request)
    stream = await engine_backend.astream_chat(request)
    streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert streamed == reply.choices[0].message.content


def test_a_tool_call_written_as_text_by_the_engine_is_parsed(engine_backend):
    reply = engine_backend.chat(_ask("What is the weather in Paris right now?", tools=[WEATHER]))
    message = reply.choices[0].message
    assert message.content is None and len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"].lower() == "paris"
    with engine_backend.stream_chat(_ask("Weather in Tokyo?", tools=[WEATHER])) as stream:
        deltas = [d for c in stream if c.choices for d in c.choices[0].delta.tool_calls or ()]
    assert deltas[0].function.name == "get_weather" and deltas[0].id


def test_the_engine_refusal_of_a_too_long_prompt_is_a_400(engine_backend):
    with pytest.raises(BadRequestError):
        engine_backend.chat(_ask("word " * 9000, max_tokens=4))


def test_embeddings_equal_the_in_process_vectors(engine_backend, small_backend):
    texts = ["The ferry leaves at nine.", "배는 아홉 시에 떠납니다.", "船は九時に出ます。"]
    texts.append("A long passage about harbours and ferries. " * 120)  # several windows
    for model in (QUERY_MODEL, PASSAGE_MODEL):
        remote = engine_backend.embed({"model": model, "input": texts})
        local = small_backend.embed({"model": model, "input": texts})
        cosines = np.sum(np.array(remote.float_vectors()) * np.array(local.float_vectors()), 1)
        # A text in one window is the same vector, up to the bf16 rounding of other batch
        # shapes (1e-7 measured). A long one differs by design: its windows travel as decoded
        # text and their mean is taken after, not before, normalising (1 - cosine measured
        # at 9.9e-5 and 3.6e-5); each bound keeps ten times that margin or more.
        assert cosines[:3].min() >= 1 - 1e-5, cosines
        assert cosines[3] >= 1 - 1e-3, cosines
        assert remote.model == local.model and remote.usage == local.usage


def _judge_conversations(limit: int) -> list[list[dict[str, str]]]:
    conversations = []
    for case in sorted(load_jsonl("groundedness.jsonl"), key=lambda c: len(c["context"]))[:limit]:
        for question in QUESTIONS.values():
            conversations.append(judge_prompt(case["context"], case["response"], question))
    return conversations


def test_p_yes_read_from_engine_logprobs_matches_in_process(chat_engine, small_backend):
    conversations = _judge_conversations(3)
    gaps = p_yes_gaps_from_clean_caches(chat_engine, conversations)
    print(f"P(yes) remote vs in-process, clean caches, {len(gaps)} prompts: max {max(gaps):.5f}")
    assert max(gaps) <= 0.02, gaps

    # As served, each reader reuses what its cache holds, and the figures move a little
    # (benchmarks/README.md, "Engines as backends"); the prompts are the same all the same.
    local = YesNoReader(small_backend.judge_reader().engine)
    remote = EngineYesNoReading(
        engine_backend_api(chat_engine), chat_engine.model, embedded_chat_tokenizer("small")
    )
    for conversation in conversations[:2]:
        assert local.read(conversation)[1] == remote.read(conversation)[1]


def engine_backend_api(chat_engine):
    from backend.backends.remote_engine.api import EngineAPI

    return EngineAPI(chat_engine.url, None, 60.0, 0)


#: How far a served support may move with what the readers' caches hold: the in-process
#: reader's own run-to-run range (benchmarks/README.md, "Engines as backends").
SERVED_SUPPORT_GAP = 0.067


def test_verdicts_equal_in_process(engine_backend, small_backend):
    """The same support to within the caches' rounding, so the same verdict wherever the
    support is clear of the thresholds by more than that; a pair whose support sits on a
    threshold may fall either side (CI saw two such ambiguous pairs, 0.015 apart, split).
    A few pairs here; ``python -m benchmarks.engine_backend`` compares 20 and more."""
    local_check, calibration = p_yes_check(small_backend)
    thresholds = calibration.thresholds
    cases = sorted(load_jsonl("groundedness.jsonl"), key=lambda c: len(c["context"]))[:6]
    same, clear, gaps = 0, 0, []
    for case in cases:
        remote = engine_backend.check_groundedness(case["context"], case["response"])
        local = local_check(case["context"], case["response"])
        gap = abs(remote.support - local.support)
        gaps.append(gap)
        same += remote.verdict == local.verdict
        if min(abs(local.support - t) for t in thresholds) > gap:
            assert remote.verdict == local.verdict, case["id"]
            clear += 1
    print(
        f"verdicts equal on {same}/{len(cases)} pairs ({clear} clear of the thresholds); "
        f"support gap max {max(gaps):.4f}"
    )
    assert max(gaps) <= SERVED_SUPPORT_GAP, gaps
    assert clear >= len(cases) // 2  # most pairs are compared


def test_the_check_answers_through_chat_as_in_process(engine_backend):
    reply = engine_backend.chat(
        {
            "model": GROUNDEDNESS_MODEL,
            "messages": [
                {"role": "user", "content": "The museum opens at 10:00 and closes at 18:00."},
                {"role": "assistant", "content": "The museum opens at 10:00."},
            ],
        }
    )
    assert reply.choices[0].message.content == "grounded"


def test_response_format_reaches_the_engine(engine_backend):
    # llama-cpp-python's server enforces json_object (its grammar); json_schema it passes
    # over, where vLLM, llama-server and Ollama enforce it: the format is the engine's to keep.
    answer = engine_backend.chat(
        _ask("Anna is 31 and lives in Oslo. Give her name and age.", max_tokens=60)
        | {"response_format": {"type": "json_object"}}
    )
    assert isinstance(json.loads(answer.choices[0].message.content), dict)


def test_a_schema_no_engine_could_enforce_is_refused_before_it_is_sent(engine_backend):
    schema = {"type": "object", "not": {"required": ["a"]}}
    with pytest.raises(BadRequestError, match="'not'"):
        engine_backend.chat(
            _ask("hi")
            | {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": schema},
                }
            }
        )


def test_logprobs_are_the_engines_passed_on_whole_and_streamed(engine_backend):
    request = _ask("Say hello.", max_tokens=8) | {"logprobs": True, "top_logprobs": 3}
    choice = engine_backend.chat(request).choices[0]
    entries = choice.logprobs.content
    assert "".join(entry.token for entry in entries) == choice.message.content
    assert all(len(entry.top_logprobs) == 3 for entry in entries)
    assert all(entry.top_logprobs[0].token == entry.token for entry in entries)  # greedy
    with engine_backend.stream_chat(request) as stream:
        chunks = [c for c in stream if c.choices and c.choices[0].logprobs]
    assert [e.token for c in chunks for e in c.choices[0].logprobs.content] == [
        e.token for e in entries
    ]
    assert engine_backend.chat(_ask("Say hello.", max_tokens=4)).choices[0].logprobs is None


def test_the_report_in_front_of_the_engine(engine_backend):
    """The report of the same judge in front of the engine: its offsets cut its claims and
    chunks out of the texts, and its verdict is the plain check's wherever the support is
    clear of the thresholds by more than the engine's cache may move it."""
    case = sorted(load_jsonl("groundedness.jsonl"), key=lambda c: len(c["context"]))[0]
    context, response = case["context"], case["response"]
    report = engine_backend.check_groundedness_report(context, response)
    plain = engine_backend.check_groundedness(context, response)
    thresholds = (report.grounded_at, report.not_grounded_below)
    if min(abs(plain.support - t) for t in thresholds) > SERVED_SUPPORT_GAP:
        assert report.verdict == plain.verdict
    assert abs(report.support - plain.support) <= SERVED_SUPPORT_GAP
    assert report.model == "core-1-mini-groundedness-check-240502"
    for claim in report.claims:
        assert response[claim.start : claim.end] == claim.text
        assert all(context[e.start : e.end] == e.text for e in claim.evidence)
