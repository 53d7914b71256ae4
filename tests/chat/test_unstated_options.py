"""Optional number arguments no message states, taken out of a call, offline (issue 50).

The converter is pure; the last test runs it through the service's review of a generated
call, the engine scripted by its prompt (``tests.agent_chain.PromptScriptedEngine``) on the
small profile, which has no tool-need check.
"""

from __future__ import annotations

import json

import pytest

from backend.chat.stated_numbers import stated_numbers
from backend.chat.unstated_options import without_unstated_options
from backend.protocol.schemas import FunctionCall, ToolDefinition
from backend.testing import offline_backend
from tests.agent_chain import PromptScriptedEngine, call_text

BOOKS = {
    "type": "function",
    "function": {
        "name": "recommend_books",
        "description": "Recommend books of a genre.",
        "parameters": {
            "type": "object",
            "properties": {
                "genre": {"type": "string"},
                "count": {"type": "integer"},
                "min_rating": {"type": "number", "description": "Lowest rating out of 5"},
                "published_after": {"type": "integer"},
                "page_size": {"type": "integer", "default": 20},
                "tolerance": {"type": "number", "description": "Precision. Default is 0.001"},
                "translated": {"type": "boolean"},
                "language": {"type": "string"},
            },
            "required": ["genre", "count"],
        },
    },
}
TOOLS = [ToolDefinition.model_validate(BOOKS)]


def _kept(arguments: dict, said: str) -> dict:
    call = FunctionCall(name="recommend_books", arguments=json.dumps(arguments))
    return json.loads(without_unstated_options(call, TOOLS, said).arguments)


def test_optional_numbers_no_message_states_are_taken_out():
    arguments = {"genre": "fantasy", "count": 3, "min_rating": 4, "published_after": 2000}
    assert _kept(arguments, "Recommend 3 fantasy books.") == {"genre": "fantasy", "count": 3}


def test_stated_required_and_other_values_are_kept():
    said = "Recommend 3 fantasy books rated 4.5 or more, published after 2,015... no, 2015."
    arguments = {
        "genre": "fantasy",
        "count": 7,  # required: a made-up count is another rule's business
        "min_rating": 4.5,
        "published_after": 2015,
        "page_size": 20,  # the declared default
        "tolerance": 0.001,  # the default its description gives
        "translated": True,
        "language": "French",
    }
    assert _kept(arguments, said) == arguments


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("books rated above 4", 4),
        ("books rated above four", 4),
        ("at least 70% liked", 0.7),  # a percentage for a fraction
        ("published after 1,999", 1999),
        ("rated 3,5 or more", 3.5),  # a decimal comma
        ("half of the readers", 0.5),
        ("read in 2 hours", 120),  # in another unit: minutes
        ("read in half an hour", 30),
        ("none rated under 0", 0),
        ("just a single book", 1),
    ],
)
def test_a_number_written_in_digits_words_or_percent_is_stated(said, value):
    arguments = {"genre": "fantasy", "count": 3, "min_rating": value}
    assert _kept(arguments, f"3 fantasy books, {said}") == arguments


@pytest.mark.parametrize(
    "said",
    [
        "twenty-five fantasy books",
        "1万円以内のファンタジー小説",
        "판타지 책 다섯 권",
        "a hundred books",
    ],
)
def test_a_message_with_numbers_in_words_it_cannot_read_keeps_every_value(said):
    assert stated_numbers(said) is None
    arguments = {"genre": "fantasy", "count": 25, "min_rating": 4.2}
    assert _kept(arguments, said) == arguments


def test_calls_it_cannot_read_are_left_alone():
    for call in (
        FunctionCall(name="recommend_books", arguments="not json"),
        FunctionCall(name="recommend_books", arguments="[4]"),
        FunctionCall(name="unknown_tool", arguments='{"min_rating": 4}'),
    ):
        assert without_unstated_options(call, TOOLS, "books") is call


def test_the_call_returned_has_no_unstated_option():
    made = ("recommend_books", {"genre": "fantasy", "count": 3, "min_rating": 4})

    def script(prompt: str, constrained: bool) -> str:
        return call_text(made) if constrained else "<tool_call>\n"

    service = offline_backend(PromptScriptedEngine(script), profile="small")
    messages = [{"role": "user", "content": "Recommend 3 fantasy books."}]
    reply = service.chat({"model": "core-1-mini-chat", "tools": [BOOKS], "messages": messages})
    (call,) = reply.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"genre": "fantasy", "count": 3}
