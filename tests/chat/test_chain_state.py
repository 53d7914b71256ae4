"""The learned chain-state reading after tool results (``backend.chat.chain_state``), offline:
where it overrules the share of a call's opening, and which models get it. A scripted
engine gives the readings, so every decision here is set by the test."""

from __future__ import annotations

import json
import os

import pytest

from backend.backends.local import InProcessBackend
from backend.chat.call_after_results import CALL_AFTER_RESULTS_FROM
from backend.chat.chain_state import chain_state_reading_for
from backend.chat.prompt import render_prompt
from backend.protocol.schemas import ChatMessage, ToolDefinition
from backend.testing import CharCountEmbeddingEngine, ScriptedChatEngine, offline_backend
from tests.agent_chain import TOOLS, StateReadingEngine, answer_read_by_state
from tests.chat.test_calls_after_results import (
    BALANCE_OF_FOUND,
    PLAIN_ANSWER,
    PLAIN_MARK,
    _after_find_customer,
)

SHARE = CALL_AFTER_RESULTS_FROM["default"]


def _script(prompt: str, constrained: bool) -> str:
    """Answers ``PLAIN_ANSWER`` from the prompt without tools; with tools, calls the balance
    of the found id (the free answer's opening is decided by the first-token rule, which a
    scripted engine does not apply: the tests read the rule it was given)."""
    if PLAIN_MARK in prompt:
        return PLAIN_ANSWER
    return '{"name": "get_balance", "arguments": {"customer_id": "C-7781"}}'


def _answered(needed: bool, share: float) -> StateReadingEngine:
    engine = StateReadingEngine(_script, needed, share)
    answer_read_by_state(engine, _after_find_customer(), TOOLS)
    return engine


def test_a_call_found_needed_opens_one_whatever_the_share():
    engine = _answered(needed=True, share=0.01)
    assert engine.params[0].first_token.share == 0.0
    assert PLAIN_MARK not in engine.prompt_texts()[0]  # the answer's prompt, tools offered


def test_a_done_chain_the_model_would_call_from_is_answered_without_tools():
    engine = _answered(needed=False, share=0.6)
    [prompt] = engine.prompt_texts()  # no call written first
    assert PLAIN_MARK in prompt
    assert engine.params[0].first_token is None


def test_where_both_readings_agree_on_an_answer_the_share_rule_stands():
    engine = _answered(needed=False, share=0.01)
    assert engine.params[0].first_token.share == SHARE


def test_a_call_found_needed_is_made_as_the_model_writes_it():
    engine = StateReadingEngine(_script, needed=True, share=0.01)
    assert answer_read_by_state(engine, _after_find_customer(), TOOLS) == (
        None,
        [BALANCE_OF_FOUND],
    )


def test_the_default_profile_ships_a_reading_of_its_own_model():
    reading = chain_state_reading_for("default")
    assert reading is not None
    assert reading.weights.shape == (1536,)  # Qwen2.5-Coder-1.5B's hidden size
    assert 0.0 < reading.grounded_at < 1.0


@pytest.mark.parametrize(
    ("engine", "profile", "expected"),
    [
        (StateReadingEngine(_script, True, 0.5), "default", chain_state_reading_for("default")),
        (StateReadingEngine(_script, True, 0.5), "small", None),  # no share rule, none trained
        (ScriptedChatEngine(constrains=True), "default", None),  # no hidden states exposed
    ],
    ids=["default", "small", "no-hidden-states"],
)
def test_which_services_read_the_chain_state(engine, profile, expected):
    service = offline_backend(engine, profile=profile)._chat_service.get()
    assert service._chain_state is expected


def test_a_model_of_the_users_own_keeps_the_share_alone():
    backend = InProcessBackend(
        profile="default",
        chat_model="/models/another-model.gguf",  # its hidden states mean other things
        chat_engine_instance=StateReadingEngine(_script, True, 0.5),
        embedding_engine_instance=CharCountEmbeddingEngine(),
    )
    assert backend._chat_service.get()._chain_state is None


@pytest.mark.model
def test_the_shipped_reading_reads_the_default_model_s_own_state():
    """On the real default model (llama.cpp) the shipped weights read its hidden state after
    a tool result (they belong to that model: a hidden state of another size is refused), and
    an agent's next request comes back whole, a call or an answer, never a repeat."""
    from backend.chat.chain_state import read_chain_state
    from backend.engines.weights.embedded_chat import DEFAULT, EmbeddedWeightsError, part_paths

    try:
        part_paths(DEFAULT)
    except EmbeddedWeightsError as error:
        pytest.skip(f"the default profile's chat model is not installed: {error}")
    backend = InProcessBackend(profile="default", device=os.environ.get("CORE_TEST_DEVICE"))
    try:
        service = backend._chat_service.get()
        if not service.engine.reads_hidden_states:
            pytest.skip("the default model runs on an engine without hidden states here")
        assert service._chain_state is chain_state_reading_for("default")
        messages = [ChatMessage.model_validate(m) for m in _after_find_customer()]
        tools = [ToolDefinition.model_validate(t) for t in TOOLS]
        prompt = render_prompt(service.engine.tokenizer, messages, tools, None, constrained=True)
        state = read_chain_state(service.engine, prompt.answer.ids, service._chain_state)
        assert 0.0 <= state.share <= 1.0 and 0.0 <= state.needs_call <= 1.0
        body = {"model": "core-1-mini-chat", "messages": _after_find_customer(), "tools": TOOLS}
        message = backend.chat({**body, "temperature": 0}).choices[0].message
        calls = [
            (c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ()
        ]
        assert bool(message.content) != bool(calls)
        assert ("find_customer", {"name": "Jun Seo"}) not in calls  # the call answered
    finally:
        backend.close()
