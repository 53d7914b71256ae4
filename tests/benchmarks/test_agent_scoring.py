"""The agent benchmark's scoring and task set, offline (no model)."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.agents import world
from benchmarks.agents.scoring import (
    KINDS,
    TASK_SETS,
    Transcript,
    answer_has,
    contains,
    in_tool_order,
    load_tasks,
    of_kinds,
    repeated_calls,
    score,
    summarise,
)

SETS = {name: load_tasks(path) for name, path in TASK_SETS.items()}
#: Each set's size and its least count per kind: the held-out set is about half the dev set,
#: in the same proportions.
MINIMUM = {
    "dev": (
        48,
        {
            "one_step": 10,
            "two_step": 10,
            "three_step": 6,
            "parallel": 6,
            "tool_error": 5,
            "no_tool": 6,
            "immediate": 5,
        },
    ),
    "heldout": (
        24,
        {
            "one_step": 5,
            "two_step": 5,
            "three_step": 3,
            "parallel": 3,
            "tool_error": 3,
            "no_tool": 3,
            "immediate": 2,
        },
    ),
    # Development tasks written later for one kind of chain (a lookup, then the call that
    # uses what it finds), and two that ask two things of one employee at once.
    "lookups": (8, {"two_step": 5, "three_step": 1, "parallel": 2}),
    # Development tasks written later whose question asks yes or no: eight whose results say
    # no (s26) and eight whose results say yes (s30).
    "yes_no": (16, {"one_step": 6, "two_step": 8, "three_step": 2}),
    # Development tasks written later (s35) that name a customer or an order by its id and
    # ask for an amount a tool must give first: the id's digits are the message's only number.
    "codes": (8, {"two_step": 6, "three_step": 2}),
}
#: The sets whose languages are in the dev set's proportions (the later sets have each once
#: or more).
PROPORTIONED = ("dev", "heldout")
ALL_TASKS = [t for tasks in SETS.values() for t in tasks]


def task(kind: str = "one_step", expect: list | None = None) -> dict:
    return {"id": "t", "kind": kind, "lang": "en", "expect": expect or [], "steps": 1}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("The balance is $1,250.00.", "1250"),
        ("The balance is 1250 USD.", "1250"),
        ("잔액은 1,250.00 USD입니다.", "1250"),
        ("残高は１２５０ドルです。", "1250"),  # full-width digits
        ("It is 1 150 EUR.".replace(" 150", "\u202f150"), "1150"),  # narrow no-break space
        ("That is 87.50 USD.", "87.5"),
        ("That is 92.00 EUR.", "92"),
        ("It comes to 841,800 KRW.", "841800"),
        ("It is 513,112.50 JPY.", "513112.5"),
        ("Write to MPARK7@corp.example.", "mpark7@corp.example"),
    ],
)
def test_expected_strings_are_found_whatever_the_number_format(answer, expected):
    assert contains(answer, expected)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("There are 1420 units.", "42"),  # a number only as a whole number
        ("There are 142 units.", "42"),
        ("It is 92.5 EUR.", "92"),
        ("It is 87.55 USD.", "87.5"),
        ("Order O-1002 ships from Osaka.", "0"),
        ("I could not find it.", "1250"),
    ],
)
def test_a_number_inside_another_number_is_not_a_match(answer, expected):
    assert not contains(answer, expected)


def test_every_entry_must_be_present_and_a_list_is_alternatives():
    expect = ["15", ["cancelled", "취소"]]
    assert answer_has("KTX-117은 15분 지연, KTX-142는 취소되었습니다.", expect)
    assert answer_has("KTX-117 is 15 minutes late; KTX-142 was cancelled.", expect)
    assert not answer_has("KTX-117 is 15 minutes late.", expect)


def test_success_needs_every_expected_string_in_the_final_answer():
    expected = task(expect=["18", "23"])
    assert score(expected, Transcript([("get_weather", {})], "Seoul 18 °C, Tokyo 23 °C", 2)).success
    assert not score(expected, Transcript([("get_weather", {})], "Seoul is 18 °C.", 2)).success
    assert not score(expected, Transcript([("get_weather", {})], "", 3)).success


def test_no_tool_task_succeeds_with_no_call_and_a_non_empty_answer():
    no_tool = task("no_tool")
    assert score(no_tool, Transcript([], "Paris.", 1)).success
    assert not score(no_tool, Transcript([("get_weather", {"city": "Paris"})], "Paris.", 2)).success
    assert not score(no_tool, Transcript([], "  ", 1)).success


def test_repeated_calls_are_same_name_and_same_arguments_as_an_earlier_call():
    calls = [
        ("get_weather", {"city": "Seoul"}),
        ("get_weather", {"city": "Tokyo"}),  # other arguments: not a repeat
        ("get_weather", {"city": "Seoul"}),  # repeat
        ("find_train", {"destination": "Busan", "origin": "Seoul"}),
        ("find_train", {"origin": "Seoul", "destination": "Busan"}),  # repeat, keys reordered
        ("get_weather", {"city": "Seoul"}),  # repeat again
    ]
    assert repeated_calls(calls) == 3
    result = score(task(expect=["18"]), Transcript(calls, "18", 7))
    assert (result.calls, result.repeated_calls, result.steps) == (6, 3, 7)


def test_summary_groups_kinds_as_issue_50_asks():
    rows = [
        {
            "kind": "one_step",
            "success": True,
            "repeated_calls": 0,
            "limit_reached": False,
            "seconds": 1.0,
        },
        {
            "kind": "no_tool",
            "success": False,
            "repeated_calls": 0,
            "limit_reached": False,
            "seconds": 2.0,
        },
        {
            "kind": "three_step",
            "success": True,
            "repeated_calls": 2,
            "limit_reached": True,
            "seconds": 6.0,
        },
    ]
    summary = summarise(rows)
    assert summary["groups"] == {"one step or none": (1, 2), "two or more dependent steps": (1, 1)}
    assert (summary["all"], summary["repeated_calls"], summary["limits_reached"]) == ((2, 3), 2, 1)
    assert summary["mean_seconds"] == 3.0


# ------------------------------------------------------------------------- the task set


@pytest.mark.parametrize("name", sorted(SETS))
def test_tasks_are_well_formed(name):
    tasks = SETS[name]
    ids = [t["id"] for t in tasks]
    assert len(ids) == len(set(ids)) >= MINIMUM[name][0]
    for t in tasks:
        assert t["kind"] in KINDS and t["lang"] in {"en", "ko", "ja"}, t["id"]
        assert t["question"].strip(), t["id"]
        assert 4 <= len(t["tools"]) <= 6 and len(set(t["tools"])) == len(t["tools"]), t["id"]
        assert set(t["tools"]) <= set(world.TOOLS), t["id"]
        assert {call["name"] for call in t["solution"]} <= set(t["tools"]), t["id"]
        # Always some distractors: tools offered that the solution does not use.
        assert set(t["tools"]) - {call["name"] for call in t["solution"]}, t["id"]
        if t["kind"] == "no_tool":
            assert t["expect"] == [] and t["solution"] == [] and t["steps"] == 0, t["id"]
        else:
            assert t["expect"] and 1 <= t["steps"] <= len(t["solution"]), t["id"]


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_kind_and_language_is_represented(name):
    tasks = SETS[name]
    kinds = Counter(t["kind"] for t in tasks)
    for kind, minimum in MINIMUM[name][1].items():
        assert kinds[kind] >= minimum, kind
    languages = Counter(t["lang"] for t in tasks)
    assert set(languages) == {"en", "ko", "ja"}
    if name in PROPORTIONED:
        assert languages["en"] > languages["ko"] >= 0.15 * len(tasks)
        assert languages["ja"] >= 0.15 * len(tasks)


def test_the_sets_share_no_id_and_no_question():
    def question(t):
        return " ".join(t["question"].casefold().split())

    assert all(t["id"].startswith("ho-") for t in SETS["heldout"])
    assert all(t["id"].startswith("lk-") for t in SETS["lookups"])
    assert all(t["id"].startswith("yn-") for t in SETS["yes_no"])
    assert all(t["id"].startswith("cd-") for t in SETS["codes"])
    ids = [t["id"] for t in ALL_TASKS]
    questions = [question(t) for t in ALL_TASKS]
    assert len(set(ids)) == len(ids) and len(set(questions)) == len(questions)


@pytest.mark.parametrize(
    "t", [t for t in ALL_TASKS if t["kind"] != "no_tool"], ids=lambda t: t["id"]
)
def test_the_expected_answer_is_reachable_through_the_tools(t):
    results = [world.call(call["name"], call["args"]) for call in t["solution"]]
    assert answer_has("\n".join(results), t["expect"]), results
    # Each step of a dependent chain uses a value only an earlier result gave.
    if t["kind"] in {"two_step", "three_step"}:
        for earlier, call in zip(results, t["solution"][1:], strict=False):
            assert any(str(value) in earlier for value in call["args"].values()), call


def test_the_docstring_example_id_is_not_a_customer():
    assert "C-1234" in world.get_account_balance.__doc__
    assert world.call("get_account_balance", {"customer_id": "C-1234"}).startswith("unknown")


def test_tools_answer_bad_calls_with_text_not_exceptions():
    assert world.call("get_stock", {"product_id": "P-77"}).startswith("bad arguments")
    assert world.call("no_such_tool", {}) == "unknown tool no_such_tool"
    assert world.call("calculate", {"expression": "__import__('os')"}).startswith("cannot")
    assert world.call(
        "convert_currency", {"amount": "lots", "from_currency": "USD", "to_currency": "EUR"}
    ).startswith("bad arguments")


@pytest.mark.parametrize(
    "builder", [world.openai_tools, world.langchain_tools, world.llamaindex_tools]
)
def test_every_tool_can_be_offered_to_every_loop(builder):
    assert len(builder(list(world.TOOLS))) == len(world.TOOLS)


@pytest.mark.parametrize(
    ("argv", "tasks", "label"),
    [
        ([], "dev", "run"),
        (["--label", "dev4"], "dev", "dev4"),
        (["--tasks", "heldout", "--label", "final"], "heldout", "heldout-final"),
        (["--tasks", "heldout", "--label", "heldout-final"], "heldout", "heldout-final"),
    ],
)
def test_the_held_out_set_is_chosen_by_option_and_named_apart(monkeypatch, argv, tasks, label):
    from benchmarks.agents.__main__ import parse_args, results_label

    monkeypatch.setattr("sys.argv", ["benchmarks.agents", *argv])
    args = parse_args()
    assert (args.tasks, results_label(args)) == (tasks, label)
    assert (
        TASK_SETS[args.tasks].name
        == {"dev": "tasks.jsonl", "heldout": "tasks_heldout.jsonl"}[tasks]
    )


def test_a_run_may_offer_each_task_s_tools_reversed_or_shuffled_leaving_the_tasks_as_they_are():
    tasks = SETS["dev"][:3]
    listed = [task["tools"] for task in tasks]
    assert in_tool_order(tasks, "given") == tasks
    reversed_tasks = in_tool_order(tasks, "reversed")
    assert [task["tools"] for task in reversed_tasks] == [tools[::-1] for tools in listed]
    assert [task["tools"] for task in tasks] == listed
    shuffled = in_tool_order(tasks, "shuffled", seed=1)
    assert [sorted(task["tools"]) for task in shuffled] == [sorted(tools) for tools in listed]
    assert shuffled == in_tool_order(tasks, "shuffled", seed=1)  # the same every run
    assert [task["tools"] for task in tasks] == listed
    with pytest.raises(ValueError, match="unknown tool order"):
        in_tool_order(tasks, "sorted")


def test_the_probe_reads_a_forced_call_as_the_review_leaves_it():
    from benchmarks.agents.call_share import call_kind, solution_states

    task = next(t for t in SETS["dev"] if t["id"] == "two_step-01")
    _, more, messages, following = next(solution_states(task))
    assert more
    first = [(c["name"], c["args"]) for c in task["solution"][:1]]
    assert call_kind(first, messages, following) == "repeat"
    assert call_kind(first + following, messages, following) == "next"
    assert call_kind(following, messages, following) == "next"
    assert call_kind([("get_weather", {"city": "Seoul"})], messages, following) == "other"


def test_a_run_chooses_its_tasks_by_kind_and_refuses_an_unknown_kind():
    tasks = SETS["dev"]
    chosen = of_kinds(tasks, "two_step, three_step")
    assert {task["kind"] for task in chosen} == {"two_step", "three_step"}
    assert chosen == [task for task in tasks if task["kind"] in ("two_step", "three_step")]
    with pytest.raises(ValueError, match=r"unknown kind\(s\) \['two_steps'\]"):
        of_kinds(tasks, "two_step,two_steps")


def test_each_correction_case_failed_a_call_to_a_tool_it_offers_with_that_tool_s_parameters():
    from benchmarks.agents.corrections import CASES

    for _, tools, (name, arguments), result, wanted in CASES:
        tool = next(t["function"] for t in tools if t["function"]["name"] == name)
        assert set(arguments) == set(tool["parameters"]["required"])
        assert result.startswith("unknown") and any(str(v) in result for v in arguments.values())
        # a correction respells the user's value; the last case's hint is only an example
        assert wanted is None or wanted.casefold().replace("-", "") in {
            str(v).casefold().replace(" ", "").replace("-", "").replace("_", "")
            for v in arguments.values()
        }
