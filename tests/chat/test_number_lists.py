"""Lists of numbers typed without a space after the comma, spaced in the prompts of a request
that offers tools (``backend.chat.number_lists``), offline: the converter, and which prompts
read it."""

from __future__ import annotations

import pytest

from backend.chat.number_lists import spaced_number_lists
from backend.chat.prompt import AnswerOrCall, render_prompt
from backend.protocol.schemas import ChatMessage, ToolDefinition
from backend.testing.engines import CharTokenizer
from tests.chat.test_chat_pipeline import WEATHER_TOOL


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("after 3,7 and 15 years", "after 3, 7 and 15 years"),
        ("3,5,7分のタイマー", "3, 5, 7分のタイマー"),
        ("in 1990,2005 and 2015", "in 1990, 2005 and 2015"),
        ("40,75 and 120 kg", "40, 75 and 120 kg"),
        ("0.5,0.25", "0.5, 0.25"),
        ("1,5000", "1, 5000"),
        # thousands separators: exactly three digits after the comma
        ("$5,000", "$5,000"),
        ("1,234,567 people", "1,234,567 people"),
        ("2,500ドルと7,800ドル", "2,500ドルと7,800ドル"),
        ("$12,000 after 4,8 and 16", "$12,000 after 4, 8 and 16"),
        # already spaced, or not between digits
        ("4, 7 and 9", "4, 7 and 9"),
        ("Paris,Tokyo", "Paris,Tokyo"),
        ("a1,b2", "a1,b2"),
    ],
)
def test_a_comma_is_spaced_unless_it_separates_thousands(typed, read):
    assert spaced_number_lists(typed) == read


ASKED = "Weather on days 3,7 and 15?"
SPACED = "Weather on days 3, 7 and 15?"


def _render(messages, tools, tool_choice="auto", constrained=True):
    return render_prompt(CharTokenizer(), messages, tools, tool_choice, constrained=constrained)


def _text(ids) -> str:
    return CharTokenizer().decode(ids)


@pytest.mark.parametrize("constrained", [True, False])
def test_where_calls_may_be_written_the_model_reads_the_list_spaced(constrained):
    tool = ToolDefinition.model_validate(WEATHER_TOOL)
    prompt = _render([ChatMessage(role="user", content=ASKED)], [tool], constrained=constrained)
    assert SPACED in _text(prompt.ids) and ASKED not in _text(prompt.ids)
    if isinstance(prompt, AnswerOrCall):
        assert SPACED in _text(prompt.call.ids)
        # The answer without tools (after a dropped call) reads the same conversation; the
        # tool-need check reads the user's own words.
        assert SPACED in _text(prompt.plain.ids)
        assert prompt.tool_need is not None and prompt.tool_need.message == ASKED


@pytest.mark.parametrize("tool_choice", [None, "none"])
def test_without_tools_the_message_is_read_as_typed(tool_choice):
    tools = [ToolDefinition.model_validate(WEATHER_TOOL)] if tool_choice else None
    prompt = _render([ChatMessage(role="user", content=ASKED)], tools, tool_choice)
    assert ASKED in _text(prompt.ids)


def test_only_user_messages_are_spaced():
    tool = ToolDefinition.model_validate(WEATHER_TOOL)
    messages = [
        ChatMessage(role="system", content="Codes look like 3,7."),
        ChatMessage(role="user", content=ASKED),
    ]
    text = _text(_render(messages, [tool]).ids)
    assert "Codes look like 3,7." in text and SPACED in text
