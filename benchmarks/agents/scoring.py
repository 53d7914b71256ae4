"""Scoring one agent run against its task, and the per-framework summary (pure, no model).

A run succeeds when every expected string is in the final answer: case-insensitive, after
NFKC (full-width digits are digits) and with thousands separators dropped, a number matching
only as a whole number (``"42"`` is not in ``"1420"``; ``"92"`` is in ``"92.00"``, ``"87.5"``
in ``"87.50"``). An expected entry may be a list of alternatives, any one of which will do. A
``no_tool`` task succeeds with no tool call and a non-empty answer.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TASKS = Path(__file__).with_name("tasks.jsonl")
#: ``dev``: the set the loop rules were changed against; ``heldout``: written after the rules
#: were fixed and never looked at while changing them, so its figures are a held-out measure;
#: ``lookups``: development tasks written later (s25) for a lookup and the call that uses what
#: it finds (an employee's manager), kept apart from ``dev``, whose solution chains the
#: chain-state reading is trained on; ``yes_no``: development tasks written later whose
#: question asks yes or no: eight (s26) whose results say no, where the answer must say what
#: they show, and eight (s30, ``yn-yes-``) whose results say yes, where a yes or the fact will do;
#: ``codes``: development tasks written in s35, each naming a customer or an order by its id and
#: asking for an amount or a temperature that a tool must first give (the id's digits being the
#: message's only number).
TASK_SETS = {
    "dev": TASKS,
    "heldout": Path(__file__).with_name("tasks_heldout.jsonl"),
    "lookups": Path(__file__).with_name("tasks_lookups.jsonl"),
    "yes_no": Path(__file__).with_name("tasks_yes_no.jsonl"),
    "codes": Path(__file__).with_name("tasks_codes.jsonl"),
}
KINDS = ("one_step", "two_step", "three_step", "parallel", "tool_error", "no_tool", "immediate")
#: The summary's groups, as issue 50 asks its questions.
GROUPS = {
    "one step or none": ("one_step", "no_tool", "immediate"),
    "two or more dependent steps": ("two_step", "three_step"),
    "parallel": ("parallel",),
    "tool_error": ("tool_error",),
}
_THOUSANDS = re.compile(r"(?<=\d)[,\u202f\u2009](?=\d{3}(?!\d))")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass
class Transcript:
    """What an agent loop did: its tool calls in order, its final answer, its model turns."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answer: str = ""
    turns: int = 0


@dataclass(frozen=True)
class Score:
    success: bool
    calls: int
    repeated_calls: int
    steps: int


def load_tasks(path: Path = TASKS) -> list[dict[str, Any]]:
    """The tasks, one JSON object a line."""
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def of_kinds(tasks: list[dict[str, Any]], kinds: str) -> list[dict[str, Any]]:
    """The ``tasks`` of the comma-separated ``kinds`` (``--kinds``); a kind not in ``KINDS``
    is refused rather than choosing no task."""
    chosen = {kind.strip() for kind in kinds.split(",") if kind.strip()}
    if unknown := sorted(chosen - set(KINDS)):
        raise ValueError(f"unknown kind(s) {unknown}; use {', '.join(KINDS)}")
    return [task for task in tasks if task["kind"] in chosen]


#: The orders a run may offer each task's tools in (``--tool-order``): as the task lists them
#: (most tasks list the solution's tools first, in the order the solution calls them), or
#: reversed, to see how much the model's choices hang on that order.
TOOL_ORDERS = ("given", "reversed", "shuffled")


def in_tool_order(tasks: list[dict[str, Any]], order: str, seed: int = 0) -> list[dict[str, Any]]:
    """``tasks`` offering their tools in ``order`` (``TOOL_ORDERS``; ``shuffled``: each
    task's tools in an order drawn from ``seed`` and the task's id, the same every run)."""
    if order not in TOOL_ORDERS:
        raise ValueError(f"unknown tool order {order!r}; use {', '.join(TOOL_ORDERS)}")
    if order == "given":
        return tasks
    if order == "reversed":
        return [{**task, "tools": task["tools"][::-1]} for task in tasks]
    shuffled = []
    for task in tasks:
        tools = random.Random(f"{seed}:{task['id']}").sample(task["tools"], len(task["tools"]))
        shuffled.append({**task, "tools": tools})
    return shuffled


def normalise(text: str) -> str:
    """Lower case, NFKC, thousands separators dropped: '１,２５０ USD' -> '1250 usd'."""
    # Before NFKC too: it turns a narrow no-break space into a plain one, no separator.
    text = unicodedata.normalize("NFKC", _THOUSANDS.sub("", text)).lower()
    return _THOUSANDS.sub("", text)


def contains(answer: str, expected: str) -> bool:
    """Whether ``expected`` is in ``answer`` (a number only as a whole number)."""
    answer, expected = normalise(answer), normalise(expected)
    if not _NUMBER.fullmatch(expected):
        return expected in answer
    # A decimal may go on with zeros (87.5 in 87.50); an integer with a zero fraction (92.00).
    tail = r"0*" if "." in expected else r"(?:\.0+)?"
    return re.search(rf"(?<![\d.]){re.escape(expected)}{tail}(?!\.?\d)", answer) is not None


def answer_has(answer: str, expect: Iterable[str | list[str]]) -> bool:
    """Whether every expected entry (a string, or a list of alternatives) is in the answer."""
    return all(
        any(contains(answer, option) for option in ([entry] if isinstance(entry, str) else entry))
        for entry in expect
    )


def repeated_calls(calls: list[tuple[str, dict[str, Any]]]) -> int:
    """Calls with the same name and arguments as an earlier call in the same conversation."""
    seen: set[tuple[str, str]] = set()
    repeats = 0
    for name, args in calls:
        key = (name, json.dumps(args, sort_keys=True, ensure_ascii=False, default=str))
        repeats += key in seen
        seen.add(key)
    return repeats


def score(task: dict[str, Any], transcript: Transcript) -> Score:
    """Score one run of ``task``."""
    if task["kind"] == "no_tool":
        success = not transcript.calls and bool(transcript.answer.strip())
    else:
        success = answer_has(transcript.answer, task["expect"])
    return Score(
        success=success,
        calls=len(transcript.calls),
        repeated_calls=repeated_calls(transcript.calls),
        steps=transcript.turns,
    )


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One framework's figures: success by group as (passed, total), repeated calls, limits
    reached and mean seconds per task, from result rows (``kind``, ``success``,
    ``repeated_calls``, ``limit_reached``, ``seconds``)."""
    groups = {}
    for group, kinds in GROUPS.items():
        members = [row for row in rows if row["kind"] in kinds]
        if members:
            groups[group] = (sum(row["success"] for row in members), len(members))
    return {
        "groups": groups,
        "all": (sum(row["success"] for row in rows), len(rows)),
        "repeated_calls": sum(row["repeated_calls"] for row in rows),
        "limits_reached": sum(row["limit_reached"] for row in rows),
        "mean_seconds": sum(row["seconds"] for row in rows) / len(rows) if rows else 0.0,
    }
