"""The tool-need check's development cases and the choice over their readings, offline."""

from __future__ import annotations

import json

from benchmarks.agents.scoring import TASK_SETS, load_tasks
from benchmarks.eval.tool_need import agent_cases, load_cases
from benchmarks.eval.tool_need_choice import cross_validated, shipped, with_combined


def test_agent_cases_are_the_development_tasks_only():
    cases = agent_cases()
    development = load_tasks(TASK_SETS["dev"])
    held_out = {task["question"] for task in load_tasks(TASK_SETS["heldout"])}
    assert [case["id"] for case in cases] == [task["id"] for task in development]
    assert not held_out & {case["message"] for case in cases}
    for case, task in zip(cases, development, strict=True):
        assert case["needed"] is (task["kind"] != "no_tool")
        assert [tool["function"]["name"] for tool in case["tools"]] == task["tools"]


def test_every_case_has_a_message_tools_and_a_label():
    cases = load_cases()
    assert len({case["id"] for case in cases}) == len(cases)
    for case in cases:
        assert case["message"].strip() and case["tools"]
        assert isinstance(case["needed"], bool)
        json.dumps(case["tools"])


def test_combined_reading_is_the_mean_and_missing_where_a_part_is():
    rows = with_combined(
        [
            {"tool": 0.6, "known": 0.2, "called": [["f", "{}"]], "needed": True},
            {"tool": None, "known": None, "called": [], "needed": False},
        ]
    )
    assert rows[0]["tool+known"] == 0.4
    assert rows[1]["tool+known"] is None


def test_a_reading_that_separates_the_classes_is_chosen_right_on_every_fold():
    rows = [
        {"needed": needed, "called": [["f", "{}"]], "q": 0.8 if needed else 0.2}
        for needed in [True, False] * 10
    ]
    accuracy, balanced, thresholds = cross_validated(rows, "q")
    assert (accuracy, balanced) == (1.0, 1.0)
    assert all(0.2 <= t <= 0.8 for t in thresholds)  # rounded to 3 places


def test_the_shipped_check_reads_each_question_where_it_is_asked(capsys):
    """One tool offered: the tool question at its threshold; several: the listed one. Each
    row's right question reads high exactly when a tool is needed, the other the opposite."""
    rows = []
    for offered, question, other in ((1, "tool", "tool_listed"), (3, "tool_listed", "tool")):
        for needed in (True, False) * 5:
            right, wrong = (0.9, 0.1) if needed else (0.1, 0.9)
            called = [["f", "{}"]]
            rows.append(
                {"called": called, "needed": needed, "tools_offered": offered}
                | {question: right, other: wrong}
            )
    shipped(rows)
    assert capsys.readouterr().out.splitlines()[-1] == "as shipped, all 20 cases: 1.000 right"
