"""Behaviour of the real embedded models on the small profile, on CPU (issue 2's list)."""

import base64
import json

import numpy as np
import pytest

pytestmark = pytest.mark.model

CHAT = "core-1-mini-chat"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
            "required": ["city"],
        },
    },
}


def _ask(text, **extra):
    return {
        "model": CHAT,
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        **extra,
    }


def test_factual_question_gets_a_sensible_answer(small_backend):
    result = small_backend.chat(
        _ask("What is the capital of France? Answer in one word.", max_tokens=16)
    )
    assert "paris" in result.choices[0].message.content.lower()
    assert result.model == "core-1-mini-chat-240502"
    assert result.usage.prompt_tokens > 10 and 0 < result.usage.completion_tokens <= 16


def test_japanese_model_answers_in_japanese(small_backend):
    request = _ask("日本の首都はどこですか？一言で答えてください。", max_tokens=16)
    result = small_backend.chat({**request, "model": "core-1-mini-chat-ja"})
    assert result.model == "core-1-mini-chat-ja-240510"
    answer = result.choices[0].message.content
    # The 0.5B model's facts are shaky (it has named Kyoto); the language is what -ja promises.
    assert any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in answer)


def test_prompt_that_needs_a_tool_gets_a_parsed_call(small_backend):
    result = small_backend.chat(
        _ask("What's the weather like in Seoul right now?", tools=[WEATHER_TOOL], max_tokens=64)
    )
    message = result.choices[0].message
    assert message.content is None
    [call] = message.tool_calls
    assert call.function.name == "get_weather"
    assert "seoul" in json.loads(call.function.arguments)["city"].lower()


def test_forced_tool_choice_calls_that_function(small_backend):
    forced = {"type": "function", "function": {"name": "get_weather"}}
    result = small_backend.chat(
        _ask(
            "I am flying to Tokyo tomorrow.",
            tools=[WEATHER_TOOL],
            tool_choice=forced,
            max_tokens=64,
        )
    )
    [call] = result.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert "tokyo" in json.loads(call.function.arguments)["city"].lower()


def test_tool_round_trip_answers_from_the_result(small_backend):
    question = "What's the weather like in Seoul right now?"
    first = small_backend.chat(_ask(question, tools=[WEATHER_TOOL], max_tokens=64))
    [call] = first.choices[0].message.tool_calls
    messages = [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {
            "role": "tool",
            "tool_call_id": call.id,
            "content": '{"temperature_c": 27, "condition": "light rain"}',
        },
    ]
    second = small_backend.chat(
        {
            "model": CHAT,
            "messages": messages,
            "tools": [WEATHER_TOOL],
            "temperature": 0,
            "max_tokens": 64,
        }
    )
    answer = second.choices[0].message
    assert answer.tool_calls is None
    assert "rain" in answer.content.lower()  # only the tool result says so


@pytest.mark.parametrize(
    "request_body",
    [
        _ask("Name three colours of the rainbow.", max_tokens=40),
        _ask("What's the weather like in Paris?", tools=[WEATHER_TOOL], max_tokens=64),
    ],
    ids=["text", "tool-call"],
)
def test_stream_equals_non_stream_under_greedy(small_backend, request_body):
    completion = small_backend.chat(request_body)
    chunks = list(
        small_backend.stream_chat({**request_body, "stream_options": {"include_usage": True}})
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or ()]
    message = completion.choices[0].message
    assert content == (message.content or "")
    assert "".join(d.function.arguments or "" for d in calls) == "".join(
        c.function.arguments for c in message.tool_calls or ()
    )
    assert chunks[-1].usage == completion.usage
    assert len({c.id for c in chunks}) == 1


def test_greedy_is_deterministic(small_backend):
    request = _ask("Write one sentence about the sea.", max_tokens=24)
    assert small_backend.chat(request).choices[0].message.content == (
        small_backend.chat(request).choices[0].message.content
    )


def _verdict(service, context, response):
    result = service.chat(
        {
            "model": "core-1-mini-groundedness-check",
            "messages": [
                {"role": "user", "content": context},
                {"role": "assistant", "content": response},
            ],
        }
    )
    assert result.model == "core-1-mini-groundedness-check-240502"
    return result.choices[0].message.content


CONTEXT = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in "
    "1889 and is 330 metres tall. It was designed by the company of Gustave Eiffel."
)


def test_obviously_supported_answer_is_grounded(small_backend):
    assert _verdict(small_backend, CONTEXT, "The Eiffel Tower is in Paris.") == "grounded"


def test_obviously_contradicted_answer_is_not_grounded(small_backend):
    assert (
        _verdict(small_backend, CONTEXT, "The Eiffel Tower is in Berlin, Germany.") == "notGrounded"
    )


RETRIEVAL = [
    ("How tall is the Eiffel Tower?", "The Eiffel Tower in Paris is 330 metres tall."),
    ("What do pandas eat?", "Giant pandas feed almost entirely on bamboo shoots and leaves."),
    (
        "When did the Second World War end?",
        "World War II ended in 1945 with the surrender of Japan.",
    ),
    ("서울의 인구는 얼마인가요?", "서울의 인구는 약 940만 명이다."),
    (
        "김치는 어떻게 만드나요?",
        "김치는 배추를 소금에 절인 뒤 고춧가루 양념에 버무려 발효시켜 만든다.",
    ),
    ("富士山の高さは？", "富士山は標高3776メートルで日本一高い山です。"),
    ("寿司の主な材料は何ですか？", "寿司は酢飯と新鮮な魚介類を組み合わせた日本料理です。"),
]


def test_query_embeddings_rank_the_right_passage_first(small_backend):
    passages = small_backend.embed(
        {"model": "core-embedding-1-large-passage", "input": [p for _, p in RETRIEVAL]}
    )
    queries = small_backend.embed(
        {"model": "core-embedding-1-large-query", "input": [q for q, _ in RETRIEVAL]}
    )
    assert [d.index for d in passages.data] == list(range(len(RETRIEVAL)))
    P = np.array([d.embedding for d in passages.data])
    Q = np.array([d.embedding for d in queries.data])
    assert np.allclose(np.linalg.norm(P, axis=1), 1, atol=1e-4)
    assert list((Q @ P.T).argmax(axis=1)) == list(range(len(RETRIEVAL)))
    assert passages.usage.prompt_tokens == passages.usage.total_tokens > len(RETRIEVAL) * 3


def test_query_and_passage_models_differ_and_base64_matches_floats(small_backend):
    text = "Giant pandas feed on bamboo."
    as_float = small_backend.embed({"model": "core-embedding-1-large-passage", "input": text})
    as_b64 = small_backend.embed(
        {"model": "core-embedding-1-large-passage", "input": text, "encoding_format": "base64"}
    )
    decoded = np.frombuffer(base64.b64decode(as_b64.data[0].embedding), dtype="<f4")
    assert np.allclose(decoded, as_float.data[0].embedding)
    as_query = small_backend.embed({"model": "core-embedding-1-large-query", "input": text})
    assert not np.allclose(as_query.data[0].embedding, as_float.data[0].embedding)


def test_long_input_is_embedded_whole_not_truncated(small_backend):
    start = "Bamboo is the main food of giant pandas. " * 60  # about 600 tokens: two windows
    end_a = start + "The second half talks about volcanoes and lava flows in Iceland. " * 40
    end_b = start + "The second half talks about chess openings and endgames. " * 40
    result = small_backend.embed(
        {"model": "core-embedding-1-large-passage", "input": [end_a, end_b]}
    )
    a, b = (np.array(d.embedding) for d in result.data)
    assert result.usage.prompt_tokens > 1000
    assert np.dot(a, b) < 0.99  # the differing tail beyond 512 tokens changes the vector


def test_forced_and_streamed_calls_match_a_strict_schema(small_backend):
    """Constrained decoding: enum, integer and required keys hold, streamed too."""
    import jsonschema

    parameters = {
        "type": "object",
        "properties": {
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "city": {"type": "string"},
        },
        "required": ["city", "unit", "days"],
    }
    tool = {"type": "function", "function": {"name": "forecast", "parameters": parameters}}
    request = {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": "Will it rain in Busan this week?"}],
        "tools": [tool],
        "tool_choice": "required",
        "temperature": 0,
        "max_tokens": 80,
    }
    [call] = small_backend.chat(request).choices[0].message.tool_calls
    assert call.function.name == "forecast"
    jsonschema.validate(json.loads(call.function.arguments), parameters)
    deltas = [
        delta
        for chunk in small_backend.stream_chat({**request, "stream": True})
        if chunk.choices
        for delta in chunk.choices[0].delta.tool_calls or ()
    ]
    assert {delta.index for delta in deltas} == {0}
    streamed = "".join(delta.function.arguments or "" for delta in deltas)
    assert json.loads(streamed) == json.loads(call.function.arguments)


def test_concurrent_chats_are_decoded_together_and_keep_their_own_answers(small_backend):
    """Four requests at once: each answer is its own, and the engine decoded them together.

    Each answer runs several tokens (the word written over), so that the first is still
    being decoded when the others' prompts, each evaluated in a few chunks, are in."""
    from concurrent.futures import ThreadPoolExecutor

    words = ["apple", "river", "candle", "violin"]

    def repeat(word: str) -> str:
        text = f"Write the word {word} five times, separated by spaces, and nothing else."
        request = _ask(text, max_tokens=24)
        return small_backend.chat(request).choices[0].message.content.lower()

    engine = small_backend._chat.get()
    if engine.thread_safe:  # the shared backend may have batched before this test
        engine._runner.largest_decode_batch = 0
    with ThreadPoolExecutor(len(words)) as pool:
        answers = list(pool.map(repeat, words))
    for word, answer in zip(words, answers, strict=True):
        assert word in answer
        assert not any(other in answer for other in words if other != word)
    if engine.thread_safe:  # both engines batch; a test double may take turns
        assert engine._runner.largest_decode_batch >= 2
