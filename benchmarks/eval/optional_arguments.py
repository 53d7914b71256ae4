"""Optional arguments: calls that set what the message states and leave the rest unset.

Each case of ``optional_arguments.jsonl`` (the development set) and
``optional_arguments_heldout.jsonl`` (written before any run of it, never tuned on) offers
tools with optional parameters (``tools.json``) and asks for calls that state some of them
and not others. A case is right when its calls are the expected ones (``expected``, matched
as ``metrics.judge_parallel_case`` matches several calls, so a stated optional value must be
there) and no call sets a parameter the case lists in ``unstated`` to anything but the
parameter's declared default (its JSON Schema ``default``, or the number its description
gives after "default"). One greedy request per case, all tools of the case offered
(``run_eval``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tqdm import tqdm

from benchmarks.eval import metrics

#: The sets: the development set and its held-out twin.
OPTIONAL_SETS = {
    "optional": "optional_arguments.jsonl",
    "optional_heldout": "optional_arguments_heldout.jsonl",
}
_DEFAULT = re.compile(r"\bdefault(?:s to| is|:)?\s+(-?\d+(?:\.\d+)?)", re.IGNORECASE)


def declared_default(schema: Mapping[str, Any]) -> Any:
    """The parameter's declared default, None when it declares none."""
    if "default" in schema:
        return schema["default"]
    found = _DEFAULT.search(str(schema.get("description", "")))
    return float(found[1]) if found else None


def unstated_values(
    unstated: Sequence[str],
    calls: Sequence[tuple[str, str]],
    functions: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """``name.parameter=value`` for each call setting an ``unstated`` parameter to a value
    other than its declared default."""
    found = []
    for name, arguments_text in calls:
        try:
            arguments = json.loads(arguments_text)
        except (TypeError, json.JSONDecodeError):
            continue
        properties = functions.get(name, {}).get("parameters", {}).get("properties", {})
        for parameter in unstated:
            if not isinstance(arguments, dict) or parameter not in arguments:
                continue
            default = declared_default(properties.get(parameter, {}))
            if default is None or not metrics.value_matches(default, arguments[parameter], {}):
                found.append(f"{name}.{parameter}={json.dumps(arguments[parameter])}")
    return found


def evaluate_optional_arguments(
    ask: Callable[[dict[str, Any]], tuple[list[tuple[str, str]], str | None, float]],
    cases: Sequence[dict[str, Any]],
    tools: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """One request per case, made by ``ask`` (its calls as (name, arguments), its content and
    its seconds): the share of cases right, of cases with the expected calls, and of cases
    setting an unstated value."""
    functions = {name: tool["function"] for name, tool in tools.items()}
    rows = []
    for case in tqdm(cases, desc="optional arguments", unit="case"):
        calls, content, seconds = ask(case)
        outcome = metrics.judge_parallel_case(case["expected"], calls, functions)
        unstated = unstated_values(case["unstated"], calls, functions)
        rows.append(
            {
                "id": case["id"],
                "language": case["language"],
                "calls": [{"name": n, "arguments": a} for n, a in calls],
                "content": content,
                "expected_calls": outcome.all_calls,
                "unstated_values": unstated,
                "right": outcome.all_calls and not unstated,
                "seconds": seconds,
            }
        )
    summary = {
        "cases": len(rows),
        "right": metrics.mean([float(r["right"]) for r in rows]),
        "expected_calls": metrics.mean([float(r["expected_calls"]) for r in rows]),
        "unstated_value_rate": metrics.mean([float(bool(r["unstated_values"])) for r in rows]),
        "seconds_per_case": metrics.mean([r["seconds"] for r in rows]),
    }
    return {"summary": summary, "cases": rows}
