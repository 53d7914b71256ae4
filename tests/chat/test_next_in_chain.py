"""The call made again after a reply that only repeated answered calls, offline
(``backend.chat.next_in_chain``): made only where the chain-state reading finds another
call needed, held to the tools the last step did not call, kept only where it takes a
value the last step's results gave and nothing before them did.

The engines are scripted by their prompt, by how many calls they have written and by what
their state reads (``tests.agent_chain.StateReadingEngine``).
"""

from __future__ import annotations

import json

import pytest

from backend.chat.call_review import NEXT_CALL_TRIES
from backend.chat.next_in_chain import last_step
from backend.protocol.schemas import ChatMessage, FunctionCall, ToolCall
from backend.testing import offline_backend
from tests.agent_chain import TOOLS, StateReadingEngine, answer_read_by_state, call_text
from tests.chat.test_calls_after_results import (
    BALANCE_OF_FOUND,
    FIND_JUN_SEO,
    PLAIN_ANSWER,
    PLAIN_MARK,
    _after_both_results,
    _after_find_customer,
)


def _messages(raw: list[dict]) -> list[ChatMessage]:
    return [ChatMessage.model_validate(m) for m in raw]


def _call(name: str, arguments: dict) -> ToolCall:
    function = FunctionCall(name=name, arguments=json.dumps(arguments))
    return ToolCall(id="call_x", type="function", function=function)


def test_the_last_step_is_the_last_reply_s_tools_and_what_their_results_say():
    step = last_step(_messages(_after_find_customer()))
    assert step is not None
    assert step.tools == {"find_customer"}
    assert "customer id c-7781" in step.found and "c-7781" not in step.before
    assert "jun seo" in step.before  # the question, and the call's own arguments


def test_a_conversation_not_ending_in_results_has_no_last_step():
    messages = _messages(_after_find_customer())
    assert last_step(messages[:1]) is None  # the question alone
    assert last_step(messages[:2]) is None  # a call not answered yet


@pytest.mark.parametrize(
    ("found", "arguments", "takes"),
    [
        ("Jun Seo: customer id C-7781", {"customer_id": "C-7781"}, True),
        ("Jun Seo: customer id C-7781", {"customer_id": "c-7781"}, True),  # case aside
        ("Jun Seo: customer id C-7781", {"customer_id": "C-778"}, False),  # part of a value
        ("Jun Seo: customer id C-7781", {"name": "Jun Seo"}, False),  # said before too
        ("balance 1250.00 USD", {"amount": 1250, "to": "EUR"}, True),
        ("balance 1250.00 USD", {"amount": 1250.0, "to": "EUR"}, True),
        ("balance 1250.00 USD", {"amount": 125, "to": "EUR"}, False),
        ("order O-1: product P-77", {"query": {"ids": ["P-77"]}}, True),  # nested
        ("order O-1: product P-77", {"in_stock": True}, False),
    ],
)
def test_a_call_takes_a_found_value_only_where_the_results_gave_it_first(found, arguments, takes):
    raw = _after_find_customer()
    raw[-1] = {**raw[-1], "content": found}
    step = last_step(_messages(raw))
    assert step is not None
    assert step.takes_found_value(_call("get_balance", arguments)) is takes


def repeating_then(
    *after: tuple[str, dict], repeat: tuple[str, dict], needed: bool = True
) -> StateReadingEngine:
    """Opens a call, writes ``repeat`` as its first call and the calls ``after`` in turn (the
    last of them again after that), and answers ``PLAIN_ANSWER`` from the plain prompt; its
    state reads ``needed``."""
    written = []

    def script(prompt: str, constrained: bool) -> str:
        if PLAIN_MARK in prompt or not prompt.startswith("tools:"):
            return PLAIN_ANSWER  # the prompt without tools
        if not constrained:
            return "<tool_call>\n"
        written.append(prompt)
        return call_text([repeat, *after][min(len(written), len(after) + 1) - 1])

    return StateReadingEngine(script, needed, share=0.5)


def test_after_a_repeat_the_call_held_to_the_other_tools_takes_the_found_id():
    engine = repeating_then(BALANCE_OF_FOUND, repeat=FIND_JUN_SEO)
    assert answer_read_by_state(engine, _after_find_customer(), TOOLS) == (None, [BALANCE_OF_FOUND])
    # the repeat is shown failing first (``corrected_calls``): a balance is no respelling
    free, first, _, held = engine.prompts
    assert first == held  # the same prompt, already evaluated
    first_constraint, _, held_constraint = engine.constraints[1:]
    assert "find_customer" in first_constraint.schema_json
    assert "find_customer" not in held_constraint.schema_json  # the last step's tool
    assert "get_balance" in held_constraint.schema_json
    assert engine.params[3].draft == () and engine.params[3].evaluated_apart == len(free)


def test_a_repeat_where_the_chain_is_done_is_answered_without_tools():
    # the reading finds the chain done but the model would call (from the share): the answer
    # is written from the results at once, neither the repeat nor a held call written
    engine = repeating_then(BALANCE_OF_FOUND, repeat=FIND_JUN_SEO, needed=False)
    assert answer_read_by_state(engine, _after_find_customer(), TOOLS) == (PLAIN_ANSWER, [])
    assert len(engine.prompts) == 1


def test_without_the_reading_a_repeat_is_answered_without_tools():
    engine = repeating_then(BALANCE_OF_FOUND, repeat=FIND_JUN_SEO)
    body = {"model": "core-1-mini-chat", "messages": _after_find_customer(), "tools": TOOLS}
    message = offline_backend(engine, profile="small").chat(body).choices[0].message
    assert (message.content, message.tool_calls) == (PLAIN_ANSWER, None)
    assert len(engine.prompts) == 3  # free, call, plain


def test_a_held_call_taking_nothing_the_last_step_found_is_answered_without_tools():
    # the balance repeated, then the lookup made again with the question's name: the chain
    # is done and the answer is written from the results
    balance = ("get_balance", {"customer_id": "C-7781"})
    engine = repeating_then(FIND_JUN_SEO, repeat=balance)
    assert answer_read_by_state(engine, _after_both_results(), TOOLS) == (PLAIN_ANSWER, [])
    assert len(engine.prompts) == 5  # free, call, call shown the repeat, held call, plain
    assert not engine.prompt_texts()[-1].startswith("tools:")


CONVERT = {
    "type": "function",
    "function": {
        "name": "convert_currency",
        "description": "Convert an amount of money from one currency code to another.",
        "parameters": {
            "type": "object",
            "properties": {"amount": {"type": "number"}, "to_currency": {"type": "string"}},
            "required": ["amount", "to_currency"],
        },
    },
}
CONVERT_FOUND = ("convert_currency", {"amount": 1250, "to_currency": "USD"})


def test_a_held_call_taking_nothing_found_is_made_again_held_to_the_tools_not_tried():
    # the balance repeated (and written again when shown failing), the lookup made again
    # with the question's name, then the conversion of the balance the last step found, held
    # to the one tool not yet tried
    balance = ("get_balance", {"customer_id": "C-7781"})
    engine = repeating_then(balance, FIND_JUN_SEO, CONVERT_FOUND, repeat=balance)
    answer = answer_read_by_state(engine, _after_both_results(), [*TOOLS, CONVERT])
    assert answer == (None, [CONVERT_FOUND])
    *_, first_try, second_try = engine.constraints
    assert "find_customer" in first_try.schema_json and "convert_currency" in first_try.schema_json
    assert "find_customer" not in second_try.schema_json  # tried, and took nothing found
    assert "get_balance" not in second_try.schema_json  # the last step's tool


def test_the_next_call_is_tried_at_most_a_bounded_number_of_times():
    names = [f"convert_{n}" for n in range(NEXT_CALL_TRIES + 2)]
    tools = [*TOOLS, *(_named(CONVERT, name) for name in names)]
    unfounded = [(name, {"amount": 99, "to_currency": "USD"}) for name in names]
    balance = ("get_balance", {"customer_id": "C-7781"})
    engine = repeating_then(balance, *unfounded, repeat=balance)
    assert answer_read_by_state(engine, _after_both_results(), tools) == (PLAIN_ANSWER, [])
    # free, the call, the repeat shown failing, the held tries, the plain prompt
    assert len(engine.constraints) == 3 + NEXT_CALL_TRIES + 1
    held = engine.constraints[3:-1]
    for n, constraint in enumerate(held):  # each try without the tools tried before it
        assert all(f'"{name}"' not in constraint.schema_json for name in names[:n])
        assert f'"{names[n]}"' in constraint.schema_json
    assert engine.constraints[-1] is None


def _named(tool: dict, name: str) -> dict:
    return {**tool, "function": {**tool["function"], "name": name}}


def test_a_result_of_several_words_passed_on_whole_is_not_a_found_value():
    # given "no train from Osaka to Seoul", the model asked for the status of that "train";
    # each answer ("unknown train number ...") would have been passed on in turn
    raw = _after_find_customer()
    raw[-1] = {**raw[-1], "content": "no train from Osaka to Seoul"}
    step = last_step(_messages(raw))
    assert step is not None
    passed_on = _call("get_train_status", {"train_number": "no train from Osaka to Seoul"})
    assert not step.takes_found_value(passed_on)
    raw[-1] = {**raw[-1], "content": "C-7781"}  # a bare id is a found value all the same
    bare = last_step(_messages(raw))
    assert bare is not None and bare.takes_found_value(_call("get_balance", {"id": "C-7781"}))
