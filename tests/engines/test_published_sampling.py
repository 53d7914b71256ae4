"""A request that sets no top_p or top_k gets the model's published values, as vLLM gives
them (``backend.engines.published_sampling``); the sampler draws only among the top-k
likeliest tokens, then within the top-p nucleus of those."""

from __future__ import annotations

import pytest
import torch

from backend.engines.base import PublishedSampling
from backend.engines.published_sampling import (
    QWEN25_INSTRUCT,
    from_generation_config,
    from_gguf_metadata,
)
from backend.engines.sampling import sample_token
from backend.engines.weights.embedded_chat import EMBEDDED_CHAT_MODELS
from backend.protocol.errors import BadRequestError
from backend.testing import offline_backend
from backend.testing.engines import ScriptedChatEngine

#: Ten tokens, the likeliest first, none far below the others: at temperature 1 each has a
#: share of at least 3%, so a draw that never leaves the first few is the filter's doing.
LOGITS = torch.linspace(1.0, 0.0, 10)


def _draws(top_p: float, top_k: int) -> set[int]:
    return {
        sample_token(LOGITS.clone(), 1.0, top_p, torch.Generator().manual_seed(seed), top_k)
        for seed in range(300)
    }


def test_top_k_draws_only_among_the_k_likeliest_tokens():
    assert _draws(1.0, 1) == {0}
    assert _draws(1.0, 3) == {0, 1, 2}
    assert _draws(1.0, 0) == set(range(10))  # 0: all of them


def test_top_p_applies_within_the_top_k():
    """Of the top 4 (shares .29, .26, .23, .21 once renormalised), a nucleus of 0.5 keeps the
    first two (.29 alone is short of it); over all ten (.16, .14, .13, .11, ...), four."""
    assert _draws(0.5, 4) == {0, 1}
    assert _draws(0.5, 0) == set(range(4))


def test_top_k_ignores_tokens_a_mask_forbade():
    logits = LOGITS.clone()
    logits[:2] = float("-inf")
    assert {
        sample_token(logits.clone(), 1.0, 1.0, torch.Generator().manual_seed(seed), 2)
        for seed in range(100)
    } == {2, 3}


def test_a_generation_config_s_own_values_are_published_and_nothing_else():
    assert from_generation_config({"top_p": 0.8, "top_k": 20, "temperature": 0.7}) == (
        PublishedSampling(top_p=0.8, top_k=20)
    )
    assert from_generation_config({"eos_token_id": [1, 2]}) == PublishedSampling()


def test_a_gguf_s_sampling_keys_are_read_as_llama_cpp_lists_them():
    metadata = {"general.sampling.top_p": "0.950000", "general.sampling.top_k": "40"}
    assert from_gguf_metadata(metadata) == PublishedSampling(top_p=0.95, top_k=40)
    assert from_gguf_metadata({"general.name": "x"}) == PublishedSampling()


@pytest.mark.parametrize("values", [{"top_p": 0.0}, {"top_p": 1.5}, {"top_k": -1}, {"top_k": 0}])
def test_out_of_range_published_values_are_not_trusted(values):
    assert from_generation_config(values) == PublishedSampling()


def test_the_embedded_models_publish_their_upstream_values():
    assert {model.sampling for model in EMBEDDED_CHAT_MODELS.values()} == {QWEN25_INSTRUCT}
    assert QWEN25_INSTRUCT == PublishedSampling(top_p=0.8, top_k=20)


def _sampling_of(request: dict) -> tuple[float, int]:
    engine = ScriptedChatEngine("Hi.")
    engine.sampling_defaults = PublishedSampling(top_p=0.8, top_k=20)
    body = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "Hi"}]}
    offline_backend(engine).chat({**body, **request})
    [params] = engine.params
    return params.top_p, params.top_k


def test_unset_top_p_and_top_k_take_the_engine_s_published_values():
    assert _sampling_of({}) == (0.8, 20)


def test_a_request_s_own_top_p_and_top_k_win_and_minus_one_means_all():
    assert _sampling_of({"top_p": 1.0}) == (1.0, 20)
    assert _sampling_of({"top_k": -1}) == (0.8, 0)
    assert _sampling_of({"top_p": 0.3, "top_k": 5}) == (0.3, 5)


def test_a_top_k_below_minus_one_is_refused():
    with pytest.raises(BadRequestError, match="top_k must be -1, 0"):
        _sampling_of({"top_k": -2})
