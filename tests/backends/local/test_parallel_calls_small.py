"""Several tool calls on the real small model (Qwen2.5-Coder-0.5B): ``parallel_tool_calls``
false holds a reply that needs two calls to one, and by default every call parses and fits its
tool's schema. How often the default profile's model makes both calls is measured by the
evaluation (benchmarks/eval, section ``parallel``), not asserted here."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.backends.local.test_models_small import WEATHER_TOOL, _ask

pytestmark = pytest.mark.model

#: Both need two calls; greedy, the 0.5B model makes one call for the first and two for the
#: second, so ``parallel_tool_calls: false`` has a second call to hold back.
QUESTIONS = [
    "What is the weather in Paris and in Tokyo?",
    "Get the weather for Paris and for Tokyo.",
]


@pytest.mark.parametrize("question", QUESTIONS)
def test_parallel_tool_calls_false_gives_exactly_one_call(small_backend, question):
    body = _ask(question, tools=[WEATHER_TOOL], parallel_tool_calls=False, max_tokens=96)
    message = small_backend.chat(body).choices[0].message
    [call] = message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_TOOL["function"]["parameters"])


@pytest.mark.parametrize("question", QUESTIONS)
def test_by_default_every_call_names_the_tool_with_valid_arguments(small_backend, question):
    body = _ask(question, tools=[WEATHER_TOOL], max_tokens=96)
    message = small_backend.chat(body).choices[0].message
    assert message.content is None and message.tool_calls
    for call in message.tool_calls:
        assert call.function.name == "get_weather"
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, WEATHER_TOOL["function"]["parameters"])
        assert arguments["city"] in ("Paris", "Tokyo")
    assert len({c.id for c in message.tool_calls}) == len(message.tool_calls)
