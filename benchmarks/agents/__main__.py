"""Agent tasks through real agent loops on the in-process chat model (issue 50).

Runs ``tasks.jsonl`` (``--tasks heldout``: ``tasks_heldout.jsonl``; ``--tasks lookups``:
``tasks_lookups.jsonl``; ``--tasks yes_no``: ``tasks_yes_no.jsonl``) through LangChain's
``create_agent``, LlamaIndex's ``FunctionAgent`` and an OpenAI-SDK-style loop, all on one
in-process backend (the model loads once), writes
``benchmarks/agents/results-<label>-<profile>-<framework>.json`` (one row per task; the
held-out set's label starts ``heldout-``, another set's with its name) and prints each
framework's success by kind group, repeated calls, limits reached and seconds.

    CORE_MODEL_PROFILE=small python -m benchmarks.agents --profile small --limit 3
    python -m benchmarks.agents --framework langchain,openai --kinds two_step,three_step
    python -m benchmarks.agents --tasks heldout --framework langchain --label final
    python -m benchmarks.agents --framework langchain --kinds two_step --tool-order reversed
    python -m benchmarks.agents --framework llamaindex --ids two_step-02,three_step-04
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tqdm import tqdm

from backend.protocol.errors import CoreError
from benchmarks.agents.runners import RUNNERS, RecordingBackend, Run
from benchmarks.agents.scoring import (
    KINDS,
    TASK_SETS,
    TOOL_ORDERS,
    Transcript,
    in_tool_order,
    load_tasks,
    of_kinds,
    score,
    summarise,
)

HERE = Path(__file__).resolve().parent


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", default="langchain,llamaindex,openai")
    parser.add_argument(
        "--tasks",
        default="dev",
        choices=sorted(TASK_SETS),
        help="dev: tasks.jsonl (the rules were tuned on it); heldout: tasks_heldout.jsonl; "
        "lookups: tasks_lookups.jsonl (development tasks written in s25); yes_no: "
        "tasks_yes_no.jsonl (development tasks written in s26 and s30); codes: "
        "tasks_codes.jsonl (development tasks written in s35)",
    )
    parser.add_argument("--profile", default="default", choices=["default", "small"])
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--limit", type=int, default=None, help="first N tasks (after --kinds)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated task kinds")
    parser.add_argument("--ids", default=None, help="comma-separated task ids (after --kinds)")
    parser.add_argument("--label", default="run", help="names the results files")
    parser.add_argument(
        "--tool-order",
        default="given",
        choices=TOOL_ORDERS,
        help="the order each task offers its tools in: as the task lists them, reversed, or "
        "shuffled (the same shuffle every run)",
    )
    parser.add_argument(
        "--system-prompt", default=None, help="LangChain's system_prompt (default: none)"
    )
    parser.add_argument(
        "--recursion-limit",
        type=int,
        default=None,
        help="LangGraph's recursion limit (default: LangGraph's own, 10007 in langgraph 1.2)",
    )
    return parser.parse_args()


def run_framework(
    framework: str, tasks: list[dict[str, Any]], backend: RecordingBackend, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Every task through one framework's loop, scored, as result rows."""
    options: dict[str, Any] = {}
    if framework == "langchain":
        options = {"system_prompt": args.system_prompt, "recursion_limit": args.recursion_limit}
    rows = []
    for task in tqdm(tasks, desc=framework, unit="task"):
        error = None
        try:
            run = RUNNERS[framework](task, backend, args.temperature, **options)
        except CoreError as refused:  # e.g. a conversation grown past the context: a failure
            error = f"{type(refused).__name__}: {refused}"
            run = Run(Transcript(), limit_reached=False, seconds=0.0, requests=backend.take())
        result = score(task, run.transcript)
        rows.append(
            {
                "id": task["id"],
                "kind": task["kind"],
                "lang": task["lang"],
                "success": result.success,
                "calls": result.calls,
                "repeated_calls": result.repeated_calls,
                "steps": result.steps,
                "min_steps": task["steps"],
                "limit_reached": run.limit_reached,
                "seconds": round(run.seconds, 2),
                "answer": run.transcript.answer,
                "tool_calls": [{"name": n, "args": a} for n, a in run.transcript.calls],
                "requests": run.requests,
                "error": error,
            }
        )
    return rows


def table(framework: str, rows: list[dict[str, Any]]) -> str:
    """One framework's summary as aligned text."""
    summary = summarise(rows)
    lines = [f"{framework}:"]
    for group, (passed, total) in summary["groups"].items():
        lines.append(f"  {group:<30} {passed:>3}/{total:<3} {passed / total:6.0%}")
    passed, total = summary["all"]
    lines += [
        f"  {'all':<30} {passed:>3}/{total:<3} {passed / total:6.0%}",
        f"  {'repeated calls':<30} {summary['repeated_calls']:>3}",
        f"  {'limits reached':<30} {summary['limits_reached']:>3}",
        f"  {'mean seconds per task':<30} {summary['mean_seconds']:6.1f}",
    ]
    if errors := sum(row["error"] is not None for row in rows):
        lines.append(f"  {'refused by the service':<30} {errors:>3}")
    return "\n".join(lines)


def results_label(args: argparse.Namespace) -> str:
    """The label in the results file's name: a held-out run's starts ``heldout-``, so it is never
    mistaken for (or written over) a development run of the same label."""
    if args.tasks == "dev" or args.label.startswith(f"{args.tasks}-"):
        return args.label
    return f"{args.tasks}-{args.label}"


def main() -> None:
    args = parse_args()
    frameworks = [name.strip() for name in args.framework.split(",") if name.strip()]
    unknown = sorted(set(frameworks) - set(RUNNERS))
    if unknown:
        raise SystemExit(f"unknown framework(s) {unknown}; use {', '.join(RUNNERS)}")
    try:
        tasks = of_kinds(load_tasks(TASK_SETS[args.tasks]), args.kinds)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if args.ids:
        ids = {i.strip() for i in args.ids.split(",")}
        if unknown := ids - {task["id"] for task in tasks}:
            raise SystemExit(f"no task {sorted(unknown)} of the chosen set and kinds")
        tasks = [task for task in tasks if task["id"] in ids]
    tasks = in_tool_order(tasks[: args.limit], args.tool_order)

    import backend as core

    with core.connect(profile=args.profile) as inner:
        shared = RecordingBackend(inner)
        for framework in frameworks:
            rows = run_framework(framework, tasks, shared, args)
            path = HERE / f"results-{results_label(args)}-{args.profile}-{framework}.json"
            meta = {k: v for k, v in vars(args).items() if k != "framework"}
            payload = {"framework": framework, **meta, "rows": rows}
            path.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n")
            print(table(framework, rows))
            print(f"  -> {path.relative_to(HERE.parents[1])}")


if __name__ == "__main__":
    main()
