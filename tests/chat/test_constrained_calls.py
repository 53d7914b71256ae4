"""Constrained tool calls, offline: when the call is generated under its schema, and from where.

The engine here is scripted; the real engines' masking is tested in
tests/test_embedded_chat_weights.py.
"""

from __future__ import annotations

import json

import pytest

from backend.chat.generation import OPENING_TOKENS
from backend.chat.tool_calls import opens_tool_call
from backend.testing import ScriptedChatEngine, offline_backend

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
EVENT = {
    "type": "function",
    "function": {
        "name": "create_event",
        "parameters": {
            "type": "object",
            "properties": {"day": {"enum": ["monday", "tuesday"]}, "people": {"type": "integer"}},
            "required": ["day", "people"],
        },
    },
}
CONSTRAINED_CALL = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'


class ConstrainingEngine(ScriptedChatEngine):
    """Answers ``reply`` freely, and ``CONSTRAINED_CALL`` when given a constraint."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply, constrains=True)  # records each constraint in .constraints

    def generate(self, prompt_ids, params, should_stop=lambda: False, constraint=None):
        free_reply = self.reply
        if constraint is not None:
            self.reply = CONSTRAINED_CALL
        try:
            yield from super().generate(prompt_ids, params, should_stop, constraint)
        finally:
            self.reply = free_reply


def _chat(reply: str, **request):
    engine = ConstrainingEngine(reply)
    service = offline_backend(engine, profile="small")
    body = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}], **request}
    return engine, service.chat(body).choices[0].message


@pytest.mark.parametrize(
    ("opening", "written_before", "indent"),
    [
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": 12}}', "<tool_call>\n", None),
        ('```json\n{"name": "x"}', "```json\n", None),
        ('```\n[\n {"name": "x"}', "```\n", 1),  # (the offline tokens are characters)
        ('```\n{\n  "name": "x"}', "```\n", 2),
        ('{"name": "get_weather"', "", None),
        ('[{"name": "get_weather"', "", None),
        ('{{"name": "get_weather", "arguments": {"city": "Oslo"}}}', "", None),
    ],
)
def test_auto_regenerates_a_call_that_the_model_opens_under_the_constraint(
    opening, written_before, indent
):
    engine, message = _chat(opening, tools=[WEATHER, EVENT])
    free, constrained = engine.constraints
    assert free is None
    assert {alt["properties"]["name"]["const"] for alt in constrained.schema["items"]["anyOf"]} == {
        "get_weather",
        "create_event",
    }
    # The call continues the model's own opening, laid out as it began to lay it out.
    answer_prompt, call_prompt = engine.prompts
    assert call_prompt == answer_prompt + engine.tokenizer.encode(written_before)
    assert constrained.indent == indent
    [call] = message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Oslo"},
    )


def test_auto_leaves_a_plain_answer_unconstrained_and_generated_once():
    engine, message = _chat("It is sunny in Oslo.", tools=[WEATHER])
    assert engine.constraints == [None]
    assert message.content == "It is sunny in Oslo." and message.tool_calls is None


@pytest.mark.parametrize("reply", ['<tool_call>\n{"name": "get_weather"', "It is sunny."])
def test_whether_to_call_is_decided_on_the_most_likely_opening_at_any_temperature(reply):
    engine, _ = _chat(reply, tools=[WEATHER], temperature=0.9, seed=5)
    answer, *call = engine.params
    assert answer.greedy_opening == OPENING_TOKENS and answer.temperature == 0.9
    # The opening stays greedy until its tokens show whether they open a call, then ends.
    decided = answer.opening_decided
    ids = engine.tokenizer.encode
    assert not decided(ids("```")) and not decided(ids("```json\n{"))
    assert decided(ids('```json\n{"name"')) and decided(ids("```xml\n")) and decided(ids("It"))
    # A call, once chosen, and every other generation are drawn as asked from the start.
    assert all(params.greedy_opening == 0 and params.opening_decided is None for params in call)
    engine, _ = _chat("Hello.", temperature=0.9)
    assert [params.greedy_opening for params in engine.params] == [0]


def test_a_named_tool_choice_constrains_to_that_tool_alone():
    forced = {"type": "function", "function": {"name": "get_weather"}}
    engine, message = _chat("ignored", tools=[WEATHER, EVENT], tool_choice=forced)
    [constraint] = engine.constraints
    assert constraint.schema["properties"]["name"] == {"const": "get_weather"}
    assert constraint.schema["properties"]["arguments"] == WEATHER["function"]["parameters"]
    assert list(constraint.schema["properties"]) == ["name", "arguments"]  # name written first
    assert message.tool_calls[0].function.name == "get_weather"


def test_required_constrains_to_any_of_the_tools():
    engine, _ = _chat("ignored", tools=[WEATHER, EVENT], tool_choice="required")
    [constraint] = engine.constraints
    assert len(constraint.schema["items"]["anyOf"]) == 2


def test_no_tools_means_no_constraint():
    engine, message = _chat("Hello.")
    assert engine.constraints == [None]
    assert message.content == "Hello."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("  ", None),
        ("<tool", None),
        ("<tool_call>", True),
        ("Hello", False),
        ("<html>", False),
        ("{", None),
        ('{"na', None),
        ('{ "name"', True),
        ('{"x": 1}', False),
        ("`", None),
        ("```", None),
        ("```json\n", None),
        ('```json\n{"name"', True),
        ("```python\nprint(1)", False),
        ('```\n{"a": 1}', False),
        ("[", None),
        ('[ {"name"', True),
        ("[1, 2]", False),
        ('{"type": "function"', False),
        # The doubled braces of Qwen2.5-Coder's template, which its models copy.
        ("{{", None),
        ('{{"name"', True),
        ('```json\n{{"name"', True),
        ('{{"x"', False),
        ("{{{", False),
    ],
)
def test_opens_tool_call_decides_from_the_first_characters(text, expected):
    assert opens_tool_call(text) is expected


class CheckedEngine(ConstrainingEngine):
    """Opens a call; answers ``Hello there.`` when the prompt offers no tools; and says
    ``needed`` to the call check's question."""

    def __init__(self, needed: bool) -> None:
        super().__init__('<tool_call>\n{"name": "get_weather"')
        self.needed = needed
        self.checks: list[str] = []

    def generate(self, prompt_ids, params, should_stop=lambda: False, constraint=None):
        if "tools:" not in self.tokenizer.decode(prompt_ids):
            self.reply = "Hello there."
        yield from super().generate(prompt_ids, params, should_stop, constraint)

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        self.checks.append(self.tokenizer.decode(prompt_ids))
        self.reply = "yes" if self.needed else "no"
        return super().next_token_logprobs(prompt_ids, candidate_ids)


@pytest.mark.parametrize(
    ("profile", "needed", "called"),
    [
        ("default", False, False),  # the model finds the tool unneeded: answered without tools
        ("default", True, True),
        ("small", False, True),  # the small profile has no check
    ],
)
def test_a_call_the_model_finds_unneeded_is_replaced_by_a_plain_answer(profile, needed, called):
    engine = CheckedEngine(needed)
    service = offline_backend(engine, profile=profile)
    body = {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": "Good morning!"}],
        "tools": [WEATHER],
    }
    message = service.chat(body).choices[0].message
    if called:
        assert [c.function.name for c in message.tool_calls] == ["get_weather"]
        assert message.content is None
    else:
        assert message.tool_calls is None
        assert message.content == "Hello there."
    if profile == "default":
        [question] = engine.checks
        assert "Good morning!" in question and '"get_weather"' in question
    else:
        assert engine.checks == []


def test_a_forced_call_is_not_checked():
    engine = CheckedEngine(needed=False)
    service = offline_backend(engine, profile="default")
    body = {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": "Good morning!"}],
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    message = service.chat(body).choices[0].message
    assert message.tool_calls[0].function.name == "get_weather"
    assert engine.checks == []


def test_after_tool_results_the_call_is_generated_from_the_tag_whatever_the_opening():
    # There the first-token rule, not the model, chose the opening, and the draft of a
    # repeated call is written in the tag's form.
    engine = ConstrainingEngine('```\n[\n {"name": "x"}')  # indented, in a fence
    service = offline_backend(engine, profile="small")
    asked = {"id": "call_1", "type": "function"}
    asked["function"] = {"name": "get_weather", "arguments": '{"city": "Seoul"}'}
    messages = [
        {"role": "user", "content": "Weather in Seoul, then in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [asked]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, rain"},
    ]
    body = {"model": "core-1-mini-chat", "messages": messages, "tools": [WEATHER, EVENT]}
    [call] = service.chat(body).choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    answer_prompt, call_prompt = engine.prompts[:2]
    assert call_prompt == answer_prompt + engine.tokenizer.encode("<tool_call>\n")
    assert engine.constraints[1].indent is None
