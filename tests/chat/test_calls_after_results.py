"""Calls after tool results, offline (issue 50): the tools stay offered after results and the
model decides between another call and an answer; a call repeating an answered one (or one
earlier in the same reply) is dropped; a call with a made-up argument (copied from a tool's
description, an id no message gives, a name given as an id) is shown to the model
as failed and made again; an empty answer falls back to the plain answer.

The engines are scripted by their prompt (``tests.agent_chain.PromptScriptedEngine``); the
small profile has no tool-need check, so the review rules are tested alone.
"""

from __future__ import annotations

import json

import pytest

from backend.chat.made_up_arguments import (
    NAME_AS_ID_RESULT,
    UNFOUNDED_RESULT,
    unfounded_arguments,
)
from backend.chat.repeated_calls import (
    answered_calls,
    call_key,
    last_calls_written,
    last_reply_calls,
)
from backend.protocol.schemas import ChatMessage, FunctionCall, ToolCall, ToolDefinition
from backend.testing import offline_backend
from backend.testing.engines import yes_or_no_logprobs
from tests.agent_chain import (
    ANSWER,
    EXAMPLE_ID,
    GET_BALANCE_DESCRIPTION,
    QUESTION,
    TOOLS,
    ChainEngine,
    PromptScriptedEngine,
    call_text,
)
from tests.chat.test_chat_pipeline import _fold_stream

PLAIN_MARK = "Results of the tool calls"
FOUND = "Jun Seo: customer id C-7781"
FIND_JUN_SEO = ("find_customer", {"name": "Jun Seo"})
BALANCE_OF_FOUND = ("get_balance", {"customer_id": "C-7781"})
PLAIN_ANSWER = "Jun Seo's customer id is C-7781."


def _after_find_customer(arguments: str = '{"name": "Jun Seo"}') -> list[dict]:
    """The conversation after ``find_customer`` answered (called with ``arguments``)."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "find_customer", "arguments": arguments},
    }
    return [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": FOUND},
    ]


def _calls_then_plain(*calls: tuple[str, dict]) -> PromptScriptedEngine:
    """Opens a call, writes ``calls`` when constrained, and answers ``PLAIN_ANSWER`` from the
    plain prompt (results without tools)."""

    def script(prompt: str, constrained: bool) -> str:
        if PLAIN_MARK in prompt:
            return PLAIN_ANSWER
        return call_text(*calls) if constrained else "<tool_call>\n"

    return PromptScriptedEngine(script)


def _chat(engine, messages, stream=False):
    """The reply's (content, [(name, arguments)]), non-streamed or folded from the stream."""
    service = offline_backend(engine, profile="small")
    body = {"model": "core-1-mini-chat", "messages": messages, "tools": TOOLS}
    if stream:
        content, calls, _, _ = _fold_stream(service.stream_chat({**body, "stream": True}))
        return content or None, [(c["name"], json.loads(c["arguments"])) for c in calls]
    message = service.chat(body).choices[0].message
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ()]
    return message.content, calls


def test_after_a_result_the_tools_stay_offered_and_a_new_call_comes_back():
    engine = ChainEngine()
    content, calls = _chat(engine, _after_find_customer())
    assert (content, calls) == (None, [BALANCE_OF_FOUND])
    free, constrained = engine.prompt_texts()
    assert free.startswith("tools: find_customer,get_balance\n")  # offered again
    assert f"tool: {FOUND}" in free and PLAIN_MARK not in free
    assert engine.constraints[0] is None and engine.constraints[1] is not None
    assert constrained.endswith("<tool_call>\n")


def test_the_call_asks_for_the_answers_prompt_to_be_evaluated_apart():
    """The call's prompt is the answer's and the call's opening: an engine that cached the
    answer's prompt reuses it whole (``SamplingParams.evaluated_apart``)."""
    engine = ChainEngine()
    _chat(engine, _after_find_customer())
    free, call = engine.prompts
    assert call[: len(free)] == free
    assert [p.evaluated_apart for p in engine.params] == [0, len(free)]


def test_the_call_after_results_has_the_repeat_of_the_last_reply_as_its_draft():
    """An engine that verifies drafts checks the repeat in one evaluation
    (``SamplingParams.draft``); the free answer and a first call have no draft."""
    engine = ChainEngine()
    _chat(engine, _after_find_customer())
    free, call = engine.params
    assert free.draft == ()
    repeat = '[{"name": "find_customer", "arguments": {"name": "Jun Seo"}}]'
    assert engine.tokenizer.decode(list(call.draft)) == repeat
    first = ChainEngine()
    _chat(first, [{"role": "user", "content": QUESTION}])
    assert [p.draft for p in first.params] == [(), ()]


def test_last_calls_written_is_the_last_reply_s_calls_as_the_constraint_writes_them():
    messages = _f_called_twice(("call_1", "one"), ("call_2", "서울"))
    several = '[{"name": "f", "arguments": {"n": 1}}, {"name": "f", "arguments": {"n": 2}}]'
    assert last_calls_written(messages, several=True) == several
    assert last_calls_written(messages, several=False) == '{"name": "f", "arguments": {"n": 1}}'
    assert last_calls_written(messages[:2], several=True) == ""  # no result yet
    assert last_calls_written(messages[:1], several=True) == ""


def test_the_last_reply_s_calls_are_those_its_results_answer():
    messages = _f_called_twice(("call_1", "one"), ("call_2", "서울"))
    assert [call.id for call in last_reply_calls(messages)] == ["call_1", "call_2"]
    assert last_reply_calls(messages[:2]) == []  # no result yet
    assert last_reply_calls(messages[:1]) == []


BALANCE = "balance of C-7781: 1250 EUR"


def _after_both_results() -> list[dict]:
    """The conversation after ``find_customer`` and then ``get_balance`` answered."""
    call = {
        "id": "call_2",
        "type": "function",
        "function": {"name": "get_balance", "arguments": '{"customer_id": "C-7781"}'},
    }
    return [
        *_after_find_customer(),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_2", "content": BALANCE},
    ]


def test_with_both_results_the_model_answers_from_the_prompt_with_tools():
    engine = ChainEngine()
    assert _chat(engine, _after_both_results()) == (ANSWER, [])
    [free] = engine.prompt_texts()  # answered freely, generated once
    assert free.startswith("tools: ")


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
@pytest.mark.parametrize(
    "answered", ['{"name": "Jun Seo"}', '{ "name" :"Jun Seo" }'], ids=["same", "respaced"]
)
def test_a_call_repeating_an_answered_one_is_dropped_and_the_plain_prompt_answers(answered, stream):
    engine = _calls_then_plain(FIND_JUN_SEO)
    # the answered call's arguments spelled otherwise are the same call all the same
    messages = _after_find_customer(answered)
    assert _chat(engine, messages, stream) == (PLAIN_ANSWER, [])
    *_, plain = engine.prompt_texts()
    assert PLAIN_MARK in plain and FOUND in plain
    assert not plain.startswith("tools:")  # answered without tools
    assert engine.constraints[-1] is None


def test_the_plain_answer_looks_drafts_up_and_is_not_cut_for_a_next_turn():
    """The answer from the results restates them (``SamplingParams.draft_from_prompt``),
    and no request continues its prompt (``continued_later``); the answer with the tools
    offered and the call keep the defaults."""
    engine = _calls_then_plain(FIND_JUN_SEO)
    assert _chat(engine, _after_find_customer()) == (PLAIN_ANSWER, [])
    *offered, plain = engine.params
    assert (plain.draft_from_prompt, plain.continued_later) == (True, False)
    assert all((p.draft_from_prompt, p.continued_later) == (False, True) for p in offered)


def test_the_plain_prompt_lists_every_result_since_the_question():
    engine = _calls_then_plain(BALANCE_OF_FOUND)  # repeats the balance call: answered plainly
    assert _chat(engine, _after_both_results()) == (PLAIN_ANSWER, [])
    *_, plain = engine.prompt_texts()
    question, results = plain.split("user: ")[1:]
    assert question.startswith(QUESTION)
    # One user turn holds both results, each after the call that gave it, in order.
    assert results.startswith(PLAIN_MARK)
    assert results.index(f'find_customer({{"name": "Jun Seo"}}) returned: {FOUND}') < results.index(
        f'get_balance({{"customer_id": "C-7781"}}) returned: {BALANCE}'
    )
    # and asks the question again after them, where the model reads it last
    assert results.index(BALANCE) < results.index(f"answer my question: {QUESTION}")
    assert "tool: " not in plain and "<tool_call>" not in plain


def test_of_two_calls_the_repeated_one_is_dropped_and_the_other_kept():
    engine = _calls_then_plain(FIND_JUN_SEO, BALANCE_OF_FOUND)
    assert _chat(engine, _after_find_customer()) == (None, [BALANCE_OF_FOUND])
    assert not any(PLAIN_MARK in p for p in engine.prompt_texts())


def test_two_identical_calls_in_one_reply_become_one():
    engine = _calls_then_plain(BALANCE_OF_FOUND, BALANCE_OF_FOUND)
    assert _chat(engine, _after_find_customer()) == (None, [BALANCE_OF_FOUND])
    engine = _calls_then_plain(FIND_JUN_SEO, FIND_JUN_SEO)  # and first, before any result
    assert _chat(engine, [{"role": "user", "content": QUESTION}]) == (None, [FIND_JUN_SEO])


def _copying_then(second: tuple[str, dict]):
    """Copies the description's example id, then (shown that) calls ``second``; answers
    ``PLAIN_ANSWER`` from a prompt without tools."""

    def script(prompt: str, constrained: bool) -> str:
        if not prompt.startswith("tools:"):
            return PLAIN_ANSWER
        if not constrained:
            return "<tool_call>\n"
        if UNFOUNDED_RESULT.format(values=EXAMPLE_ID) in prompt:
            return call_text(second)
        return call_text(("get_balance", {"customer_id": EXAMPLE_ID}))

    return script


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
def test_a_call_copying_the_descriptions_example_is_made_again_after_the_error(stream):
    engine = PromptScriptedEngine(_copying_then(FIND_JUN_SEO))
    messages = [{"role": "user", "content": QUESTION}]
    assert _chat(engine, messages, stream) == (None, [FIND_JUN_SEO])
    free, copying, retry = engine.prompt_texts()
    assert UNFOUNDED_RESULT.format(values=EXAMPLE_ID) not in copying
    # the internal exchange: the copying call, answered with the error, then a new call
    assert f"tool: {UNFOUNDED_RESULT.format(values=EXAMPLE_ID)}" in retry
    assert retry.startswith("tools: ") and retry.endswith("<tool_call>\n")
    assert engine.constraints[2] is not None


def test_a_value_the_user_gave_is_kept_even_if_the_description_shows_it():
    engine = PromptScriptedEngine(_copying_then(FIND_JUN_SEO))
    messages = [{"role": "user", "content": f"What is the balance of customer {EXAMPLE_ID}?"}]
    assert _chat(engine, messages) == (None, [("get_balance", {"customer_id": EXAMPLE_ID})])
    assert len(engine.prompts) == 2  # no retry


def test_a_retry_that_copies_again_is_answered_without_tools():
    def always_copying(prompt: str, constrained: bool) -> str:
        if PLAIN_MARK in prompt or not prompt.startswith("tools:"):
            return "I need the customer's id first."
        return (
            call_text(("get_balance", {"customer_id": EXAMPLE_ID}))
            if constrained
            else "<tool_call>"
        )

    engine = PromptScriptedEngine(always_copying)
    assert _chat(engine, [{"role": "user", "content": QUESTION}]) == (
        "I need the customer's id first.",
        [],
    )
    assert len(engine.prompts) == 4  # free, call, retry, plain
    assert not engine.prompt_texts()[-1].startswith("tools:")


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
@pytest.mark.parametrize("said", ["", " ", "\n \n"], ids=["nothing", "a space", "blank lines"])
def test_an_empty_first_answer_gives_the_plain_answer(stream, said):
    def ends_at_once(prompt: str, constrained: bool) -> str:
        return PLAIN_ANSWER if PLAIN_MARK in prompt else said

    engine = PromptScriptedEngine(ends_at_once)
    assert _chat(engine, _after_find_customer(), stream) == (PLAIN_ANSWER, [])
    free, plain = engine.prompt_texts()
    assert free.startswith("tools: ") and PLAIN_MARK in plain
    assert engine.constraints == [None, None]


# ---------------------------------------------------------------- the checks themselves


def test_call_key_ignores_key_order_and_spacing():
    assert call_key("f", '{"a": 1, "b": [1, 2]}') == call_key("f", '{ "b":[1,2],"a":1 }')
    assert call_key("f", '{"a": 1}') != call_key("g", '{"a": 1}')
    assert call_key("f", '{"a": 1}') != call_key("f", '{"a": "1"}')
    assert call_key("f", "not json") == ("f", '"not json"')  # compared as the text it is


def _f_called_twice(*results: tuple[str, str]) -> list[ChatMessage]:
    """A reply calling ``f`` twice (``call_1``, ``call_2``), then ``results`` (call id, text)."""
    calls = [
        ToolCall(id=f"call_{i}", function=FunctionCall(name="f", arguments=f'{{"n": {i}}}'))
        for i in (1, 2)
    ]
    return [
        ChatMessage(role="user", content="go"),
        ChatMessage(role="assistant", content=None, tool_calls=calls),
        *(ChatMessage(role="tool", tool_call_id=i, content=text) for i, text in results),
    ]


def test_answered_calls_counts_only_calls_with_a_result():
    messages = _f_called_twice(("call_2", "two"))
    assert answered_calls(messages) == {call_key("f", '{"n":2}'): "two"}
    assert answered_calls(messages[:2]) == {}


def _copied(arguments: dict, said: str = "", description: str = GET_BALANCE_DESCRIPTION):
    tool = ToolDefinition.model_validate(
        {**TOOLS[1], "function": {**TOOLS[1]["function"], "description": description}}
    )
    call = FunctionCall(name="get_balance", arguments=json.dumps(arguments, ensure_ascii=False))
    found = unfounded_arguments(call, [tool], said.casefold())
    return found.values + found.names


def test_unfounded_arguments_are_values_with_a_digit_from_a_description_and_no_message():
    assert _copied({"customer_id": EXAMPLE_ID}) == [EXAMPLE_ID]
    assert _copied({"customer_id": "c-1234 "}) == ["c-1234 "]  # case and spaces aside
    assert _copied({"customer_id": EXAMPLE_ID}, said=f"balance of {EXAMPLE_ID}?") == []
    assert _copied({"note": "C-7781"}) == []  # neither in a description nor an id


def test_a_made_up_value_of_an_identifier_parameter_is_unfounded_though_not_described():
    for parameter in ("customer_id", "id", "orderId", "train_number", "zip_code", "api_key"):
        assert _copied({parameter: "X-555"}) == ["X-555"], parameter
    assert _copied({"customer_id": "X-555"}, said="customer x-555, please") == []
    for parameter in ("warehouse", "valid", "paid", "hybrid", "title"):
        assert _copied({parameter: "X-555"}) == [], parameter


def test_an_id_without_a_digit_is_unfounded_when_said_nowhere():
    assert _copied({"customer_id": "JunSeo"}) == ["JunSeo"]
    assert _copied({"orderId": "latest"}) == ["latest"]
    assert _copied({"customer_id": "junseo"}, said="my customer id is junseo") == []
    # not an id proper: codes and numbers without a digit are chosen, not looked up
    for parameter in ("currency_code", "order_number", "api_key", "warehouse"):
        assert _copied({parameter: "EUR"}) == [], parameter


def test_a_name_given_as_an_id_is_unfounded_though_said():
    call = FunctionCall(name="get_balance", arguments='{"customer_id": "Jun Seo"}')
    found = unfounded_arguments(call, [ToolDefinition.model_validate(TOOLS[1])], "jun seo")
    assert (found.values, found.names) == ([], ["Jun Seo"])
    assert found.result() == NAME_AS_ID_RESULT.format(values="Jun Seo")
    assert _copied({"customer_id": "C 1234"}, said="customer c 1234") == []  # a digit: an id
    assert _copied({"title": "Jun Seo"}) == []  # not an id parameter


def test_values_without_a_digit_named_by_a_description_are_kept():
    description = "Balance in a currency: euro or dollar."
    assert _copied({"customer_id": "euro"}, description=description) == []


def test_copied_values_are_found_in_nested_arguments():
    nested = {"filter": {"refs": ["C-7781", EXAMPLE_ID]}, "page": 2}
    assert _copied(nested) == [EXAMPLE_ID]


def test_copied_values_are_found_in_non_ascii_descriptions_and_parameters():
    korean = "고객 번호로 잔액을 조회합니다 (예: 고객-0042)."
    assert _copied({"customer_id": "고객-0042"}, description=korean) == ["고객-0042"]
    # the parameters' own descriptions count too, compared as written (not \u-escaped)
    tool = ToolDefinition.model_validate(
        {
            "type": "function",
            "function": {
                "name": "kontostand",
                "parameters": {
                    "type": "object",
                    "properties": {"kunde": {"type": "string", "description": "z. B. KÜ-77"}},
                },
            },
        }
    )
    call = FunctionCall(name="kontostand", arguments='{"kunde": "kü-77"}')
    assert unfounded_arguments(call, [tool], "").values == ["kü-77"]


class _NothingNeeded(PromptScriptedEngine):
    """Reads every tool-need question as "no" (the default profile's check is on)."""

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        return yes_or_no_logprobs(False, candidate_ids)


def test_a_call_the_tool_need_check_declines_is_not_retried():
    """The check reads the model's call first: a tool it finds unneeded for the message is
    not called with other arguments either (a lookup the retry would make instead would
    serve a call not wanted; benchmarks/README.md, "Agents that chain tools")."""
    engine = _NothingNeeded(_copying_then(FIND_JUN_SEO))
    service = offline_backend(engine, profile="default")
    body = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": QUESTION}]}
    message = service.chat({**body, "tools": TOOLS}).choices[0].message
    assert (message.content, message.tool_calls) == (PLAIN_ANSWER, None)
    free, copying, plain = engine.prompt_texts()
    assert not plain.startswith("tools:")
