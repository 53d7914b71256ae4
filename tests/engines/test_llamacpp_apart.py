"""A prompt evaluated apart (``RunnerRequest.apart``): a tool call generated from the answer's
prompt and the call's opening reuses that prompt whole from the cache, where it was evaluated
as a prompt of its own, and never reuses cells computed across the point where it is cut.
Offline, against the runner tests' stand-in for llama.cpp."""

from __future__ import annotations

import pytest

from backend.engines.llamacpp_runner import PREFILL_CHUNK, BatchingRunner
from tests.engines.test_llamacpp_runner import END, VOCAB, FakeLlamaCpp, expected_answer, greedy


@pytest.fixture
def runner_and_native():
    native = FakeLlamaCpp(4096)
    runner = BatchingRunner("ctx", VOCAB, slots=3, kv_cells=4096, native=native)
    yield runner, native
    runner.close()


def generate(runner, prompt, budget, apart=0):
    return list(runner.generate(prompt, budget, greedy, lambda: False, frozenset({END}), apart))


ANSWER = [5] * (PREFILL_CHUNK + 50)  # an answer's prompt: one whole chunk and 50 tokens
CALL = [*ANSWER, 7, 8]  # the call's: the answer's and the call's opening


def test_the_answers_whole_prompt_is_reused_by_the_call_evaluated_apart(runner_and_native):
    runner, native = runner_and_native
    generate(runner, ANSWER, 3)
    native.batch_sizes.clear()
    assert generate(runner, CALL, 3, apart=len(ANSWER)) == expected_answer(CALL, 3)
    assert native.batch_sizes[0] == 2  # only the opening


def test_without_apart_only_whole_chunks_are_reused(runner_and_native):
    runner, native = runner_and_native
    generate(runner, ANSWER, 3)
    native.batch_sizes.clear()
    assert generate(runner, CALL, 3) == expected_answer(CALL, 3)
    assert native.batch_sizes[0] == len(CALL) - PREFILL_CHUNK


def test_a_prompt_evaluated_apart_is_cut_there(runner_and_native):
    runner, native = runner_and_native
    assert generate(runner, CALL, 2, apart=len(ANSWER)) == expected_answer(CALL, 2)
    assert native.batch_sizes[:3] == [PREFILL_CHUNK, 50, 2]


def test_the_whole_prompt_set_aside_by_a_lone_request_comes_back(runner_and_native):
    """The tool-need check runs between the answer and an agent's next step: the answer's
    whole prompt is set aside and put back, at cells 0 onwards."""
    runner, native = runner_and_native
    generate(runner, ANSWER, 3)
    generate(runner, [9] * 30, 2)  # the cache now holds only this request
    native.batch_sizes.clear()
    assert generate(runner, CALL, 3, apart=len(ANSWER)) == expected_answer(CALL, 3)
    assert native.batch_sizes[0] == 2
    assert [len(kv) for kv in native.kv.values() if kv] == [len(CALL) + 2]


def test_cells_computed_across_the_point_apart_are_not_reused(runner_and_native):
    """A cached prefix whose chunk spans the point where the prompt is cut was evaluated
    otherwise than the prompt evaluated apart: only the whole chunks before that point are
    reused, and the chunk up to it is evaluated again."""
    runner, native = runner_and_native
    longer = [5] * (2 * PREFILL_CHUNK + 10)  # its second chunk spans len(ANSWER)
    generate(runner, longer, 2)
    native.batch_sizes.clear()
    call = [*ANSWER, 5, 5, 5]
    assert generate(runner, call, 2, apart=len(ANSWER)) == expected_answer(call, 2)
    assert native.batch_sizes[:2] == [50, 3]


def test_a_prompt_cut_at_its_own_end_still_evaluates_its_last_chunk(runner_and_native):
    """The whole prompt cached is not reused by the same prompt: its last token's logits are
    needed, so only its whole chunks are reused."""
    runner, native = runner_and_native
    generate(runner, ANSWER, 2)
    native.batch_sizes.clear()
    assert generate(runner, ANSWER, 2, apart=len(ANSWER)) == expected_answer(ANSWER, 2)
    assert native.batch_sizes[0] == len(ANSWER) - PREFILL_CHUNK
