import json

import pytest

from backend.chat.tool_calls import opens_tool_call, parse_tool_calls

TOOLS = frozenset({"get_weather", "add"})


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Seoul"}}\n</tool_call>',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Seoul"}}',  # unclosed at EOS
        '```json\n{"name": "get_weather", "arguments": {"city": "Seoul"}}\n```',
        '```json\n[\n    {\n        "name": "get_weather",\n        "arguments": {\n'
        '            "city": "Seoul"\n        }\n    }\n]',  # unclosed: a call in the fence's form
        '{"name": "get_weather", "arguments": {"city": "Seoul"}}',
        '  {"name": "get_weather", "parameters": {"city": "Seoul"}}  ',
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Seoul\\"}"}',
        '[{"name": "get_weather", "arguments": {"city": "Seoul"}}]',
        '<tool_call>{"type": "function", "function": {"name": "get_weather", "arguments": '
        '{"city": "Seoul"}}}</tool_call>',
    ],
)
def test_tagged_fenced_and_bare_calls_parse_to_the_same_call(text):
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.content is None
    [call] = parsed.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Seoul"}
    assert call.id.startswith("call_") and call.type == "function"


def test_several_tagged_calls_get_unique_ids():
    text = (
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
        '<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n</tool_call>'
    )
    calls = parse_tool_calls(text, TOOLS).tool_calls
    assert [json.loads(c.function.arguments) for c in calls] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert len({c.id for c in calls}) == 2


@pytest.mark.parametrize(
    "text",
    [
        "The weather in Seoul is sunny.",
        '{"name": "unknown_tool", "arguments": {}}',  # not one of the request's tools
        '{"city": "Seoul"}',  # JSON, but not a call
        "```python\nprint('hi')\n```",
        '<tool_call>{"name": "get_weather", "arguments": {"city": ',  # cut off: not valid
        'Sure: {"name": "get_weather", "arguments": {}}',  # a call must start the output
        # OpenAI's shape opens without "name": only inside the tag does it count
        '{"type": "function", "function": {"name": "get_weather", "arguments": {}}}',
        '{"arguments": {"city": "Seoul"}, "name": "get_weather"}',
    ],
)
def test_text_that_is_not_a_call_stays_content(text):
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.tool_calls == [] and parsed.content == text


def test_without_tools_nothing_is_a_call():
    text = '{"name": "get_weather", "arguments": {}}'
    assert parse_tool_calls(text, frozenset()).content == text


CALLS = [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Seoul"}}\n</tool_call>',
    '```json\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n```',
    ' {"name": "add", "arguments": {"a": 1, "b": 2}}',
    '[{"name": "add", "arguments": {"a": 1, "b": 2}}]',
]
NOT_CALLS = [
    "Hello there.",
    '{"city": "Seoul"}',
    "```python\nprint('hi')\n```",
    "[1, 2, 3]",
    '{"type": "function", "function": {"name": "add", "arguments": {}}}',
]


@pytest.mark.parametrize("text", CALLS)
def test_every_opening_of_a_call_is_held_and_the_whole_call_is_one(text):
    # Streaming holds text while opens_tool_call is not False: no prefix of a call may be
    # ruled out, or part of it would go out as content before the call is parsed.
    assert all(opens_tool_call(text[:end]) is not False for end in range(len(text) + 1))
    assert opens_tool_call(text) is True
    assert parse_tool_calls(text, TOOLS).tool_calls


@pytest.mark.parametrize("text", NOT_CALLS)
def test_what_the_opening_rules_out_is_never_parsed_as_a_call(text):
    assert opens_tool_call(text) is False
    assert parse_tool_calls(text, TOOLS).tool_calls == []
