"""The tool-need check's question, offline: a tool asked about alone where it is the only one
offered, among the offered tools where there are several, each question with its own
threshold (``backend.chat.tool_need``)."""

from __future__ import annotations

import math

import pytest

from backend.chat.tool_need import (
    QUESTION,
    TOOL_NEED_THRESHOLDS,
    ToolNeedCheck,
    ToolNeedThresholds,
    question,
)
from backend.testing import offline_backend
from tests.chat.test_constrained_calls import EVENT, WEATHER, CheckedEngine

FIND = "Find an employee's id by name"
EMAIL = "Email of an employee by id"
ASKED = "What is Lena Fischer's email?"


def test_the_only_tool_offered_is_asked_about_alone_with_its_description():
    check = ToolNeedCheck(ASKED, {"find_employee_id": FIND})
    asked = question(check, "find_employee_id")
    assert asked == QUESTION.format(message=ASKED, name="find_employee_id", description=FIND)
    assert "Tools:" not in asked


def test_among_several_tools_every_one_is_listed_and_the_asked_one_named():
    check = ToolNeedCheck(ASKED, {"find_employee_id": FIND, "get_employee_email": EMAIL})
    asked = question(check, "find_employee_id")
    assert asked.startswith(f"Message: {ASKED}\n\nTools:\n")
    assert f"- find_employee_id: {FIND}\n- get_employee_email: {EMAIL}\n" in asked
    assert asked.endswith('necessary to use the tool "find_employee_id"? Answer yes or no.')
    # Asked about the other tool, the prompt differs only after the list (its prefix is reused).
    other = question(check, "get_employee_email")
    cut = asked.index("To reply")
    assert other[:cut] == asked[:cut] and other != asked


def test_each_tool_is_listed_on_one_line_without_a_signature_that_repeats_its_name():
    """LlamaIndex's ``FunctionTool`` writes the signature above the docstring."""
    check = ToolNeedCheck(
        ASKED,
        {
            "find_employee_id": f"find_employee_id(name: 'str') -> 'str'\n{FIND}",
            "get_employee_email": "Email of an employee\n  by id.",
            "signature_alone": "signature_alone(x: int)",
        },
    )
    listed = question(check, "find_employee_id").split("Tools:\n")[1].split("\n\n")[0]
    assert listed.splitlines() == [
        f"- find_employee_id: {FIND}",
        "- get_employee_email: Email of an employee by id.",
        "- signature_alone: signature_alone(x: int)",
    ]


def test_each_question_has_its_own_threshold():
    thresholds = ToolNeedThresholds(alone=0.5, among_tools=0.7)
    assert thresholds.for_check(ToolNeedCheck(ASKED, {"a": ""})) == 0.5
    assert thresholds.for_check(ToolNeedCheck(ASKED, {"a": "", "b": ""})) == 0.7


class ReadingEngine(CheckedEngine):
    """``CheckedEngine`` whose every tool-need question reads P(yes) = ``p_yes``."""

    def __init__(self, p_yes: float) -> None:
        super().__init__(needed=True)
        self.p_yes = p_yes

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        self.checks.append(self.tokenizer.decode(prompt_ids))
        shares = {ord("y"): self.p_yes, ord("n"): 1.0 - self.p_yes}
        return [math.log(shares.get(c, 1e-12)) for c in candidate_ids]


@pytest.mark.parametrize(("tools", "kept"), [([WEATHER], True), ([WEATHER, EVENT], False)])
def test_a_reading_between_the_two_thresholds_keeps_the_call_only_where_one_tool_is_offered(
    tools, kept
):
    default = TOOL_NEED_THRESHOLDS["default"]
    assert default is not None and default.alone < default.among_tools
    engine = ReadingEngine((default.alone + default.among_tools) / 2)
    service = offline_backend(engine, profile="default")
    body = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "Hi!"}]}
    message = service.chat({**body, "tools": tools}).choices[0].message
    if kept:
        assert [c.function.name for c in message.tool_calls] == ["get_weather"]
    else:
        assert (message.content, message.tool_calls) == ("Hello there.", None)
    [asked] = engine.checks
    assert ("- create_event: " in asked) is (len(tools) > 1)
