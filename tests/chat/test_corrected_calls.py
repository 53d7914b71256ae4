"""A failed call the model repeats, shown failing and made again where it only corrects
the spelling (``backend.chat.corrected_calls``), offline: the pure checks, and a scripted
engine (``tests.agent_chain.StateReadingEngine``) for the path through the generation.
"""

from __future__ import annotations

import json

import pytest

from backend.chat.corrected_calls import (
    CORRECTION,
    correction_exchange,
    corrections,
    repeated_calls,
    respells,
)
from backend.chat.repeated_calls import call_key
from backend.protocol.schemas import FunctionCall, ToolCall
from tests.agent_chain import TOOLS, answer_read_by_state
from tests.chat.test_calls_after_results import FIND_JUN_SEO, PLAIN_ANSWER
from tests.chat.test_next_in_chain import repeating_then

FAILED = "unknown customer id c 7781; customer ids look like C-1234"


def _call(name: str, arguments: dict, call_id: str = "call_x") -> ToolCall:
    function = FunctionCall(name=name, arguments=json.dumps(arguments))
    return ToolCall(id=call_id, type="function", function=function)


@pytest.mark.parametrize(
    ("arguments", "kept"),
    [
        ({"customer_id": "C-7781"}, True),  # case and punctuation
        ({"customer_id": "C7781"}, True),
        ({"customer_id": "c_7781"}, True),
        ({"customer_id": "c 7781"}, False),  # the same call
        ({"customer_id": "C-1234"}, False),  # the tool's example, not the user's value
        ({"customer_id": "C-77810"}, False),
        ({"customer_id": "C-7781", "currency": "EUR"}, False),  # an argument added
    ],
)
def test_a_call_is_kept_only_where_it_respells_the_repeated_one(arguments, kept):
    repeat = _call("get_balance", {"customer_id": "c 7781"})
    assert respells(_call("get_balance", arguments), [repeat]) is kept


def test_a_respelling_of_another_tool_s_call_is_not_kept():
    repeat = _call("get_balance", {"customer_id": "c 7781"})
    assert not respells(_call("find_customer", {"customer_id": "C-7781"}), [repeat])


def test_nested_values_and_numbers_are_compared_as_written():
    repeat = _call("convert", {"amount": 100, "codes": {"from": "usd", "to": ["eur"]}})
    assert respells(
        _call("convert", {"amount": 100, "codes": {"from": "USD", "to": ["EUR"]}}), [repeat]
    )
    assert not respells(
        _call("convert", {"amount": 10, "codes": {"from": "USD", "to": ["EUR"]}}), [repeat]
    )


def test_corrections_are_respellings_each_once_none_answered():
    repeat = _call("get_balance", {"customer_id": "c 7781"})
    answered = {call_key("get_balance", '{"customer_id": "C7781"}'): FAILED}
    upper = _call("get_balance", {"customer_id": "C-7781"}, "call_1")
    twice = _call("get_balance", {"customer_id": "C-7781"}, "call_2")
    tried = _call("get_balance", {"customer_id": "C7781"}, "call_3")  # answered already
    example = _call("get_balance", {"customer_id": "C-1234"}, "call_4")
    assert corrections([upper, twice, tried, example], [repeat], answered) == [upper]


def test_the_repeats_are_the_answered_calls_each_once_in_order():
    answered = {call_key("get_balance", '{"customer_id": "c 7781"}'): FAILED}
    balance = _call("get_balance", {"customer_id": "c 7781"}, "call_1")
    again = _call("get_balance", {"customer_id": "c 7781"}, "call_2")
    other = _call("find_customer", {"name": "Jun Seo"}, "call_3")
    assert repeated_calls([other, balance, again], answered) == [balance]
    assert repeated_calls([other], answered) == []


def test_each_repeat_is_answered_by_its_result_and_asked_to_be_fixed():
    answered = {call_key("get_balance", '{"customer_id": "c 7781"}'): FAILED + "."}
    repeat = _call("get_balance", {"customer_id": "c 7781"}, "call_9")
    reply, result = correction_exchange([repeat], answered)
    assert reply.role == "assistant" and reply.tool_calls == [repeat]
    assert result.role == "tool" and result.tool_call_id == "call_9"
    assert result.content == CORRECTION.format(result=FAILED)  # one full stop
    assert result.content.endswith("look like C-1234. Fix the arguments as this says.")


def _after_failed_balance() -> list[dict]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_balance", "arguments": '{"customer_id": "c 7781"}'},
    }
    return [
        {"role": "user", "content": "What is the balance of customer c 7781?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": FAILED},
    ]


REPEAT = ("get_balance", {"customer_id": "c 7781"})


def test_a_repeated_failed_call_written_in_another_spelling_is_made():
    corrected = ("get_balance", {"customer_id": "C-7781"})
    engine = repeating_then(corrected, repeat=REPEAT)
    assert answer_read_by_state(engine, _after_failed_balance(), TOOLS) == (None, [corrected])
    free, _, shown = engine.prompt_texts()
    assert shown.startswith(free)  # the conversation, then the repeat and its result
    assert "look like C-1234. Fix the arguments as this says." in shown[len(free) :]
    retry_constraint = engine.constraints[2]
    assert "get_balance" in retry_constraint.schema_json
    assert "find_customer" not in retry_constraint.schema_json  # held to the repeated tool
    assert engine.params[2].draft  # the repeat, checked in one evaluation


def test_a_value_changed_in_more_than_spelling_is_not_made():
    # the tool's example: the chain asks for its next call instead (``next_in_chain``),
    # which takes nothing this step found, and the answer is written from the results
    engine = repeating_then(("get_balance", {"customer_id": "C-1234"}), FIND_JUN_SEO, repeat=REPEAT)
    assert answer_read_by_state(engine, _after_failed_balance(), TOOLS) == (PLAIN_ANSWER, [])
    assert len(engine.prompts) == 5  # free, call, call shown the repeat, held call, plain


def test_a_repeat_where_the_chain_is_done_is_not_shown_failing():
    corrected = ("get_balance", {"customer_id": "C-7781"})
    engine = repeating_then(corrected, repeat=REPEAT, needed=False)
    assert answer_read_by_state(engine, _after_failed_balance(), TOOLS) == (PLAIN_ANSWER, [])
    assert len(engine.prompts) == 1
