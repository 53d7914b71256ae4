"""What an agent's first step costs where the model calls a tool, with the text the call's
schema allows alone checked as a draft (``TokenMask.forced_text``) and without, in the same
run: each development task's question sent with its tools, as an agent loop sends it.

    python -m benchmarks.agents.call_cost --label s32

Every task's request is sent three times: once so that its prompt is cached, as it is for
the second and third, then with and without the drafts, in an order that alternates from
task to task so that neither side always runs second. Prints the mean seconds of each, their
ratio, and whether the replies were the same; writes ``benchmarks/agents/call-cost-<label>.json``.
The engine without the drafts is the same engine with its ``_forced_tokens`` hook answering
None, as an engine whose runner checks no drafts answers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks.agents import world
from benchmarks.agents.scoring import load_tasks

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--limit", type=int, default=0, help="the first so many tasks; 0: all")
    parser.add_argument("--ids", default="", help="comma-separated task ids; empty: all")
    args = parser.parse_args()
    import backend
    from backend.engines.llamacpp_chat import LlamaCppChatEngine

    with_drafts = LlamaCppChatEngine._forced_tokens
    modes = {"with": with_drafts, "without": lambda self, choose: None}
    tasks = [t for t in load_tasks() if t.get("solution")]
    if args.ids:
        tasks = [t for t in tasks if t["id"] in args.ids.split(",")]
    tasks = tasks[: args.limit] if args.limit else tasks
    rows = []
    with backend.connect() as service:
        for n, task in enumerate(tasks):
            body = {
                "model": "core-1-mini-chat",
                "tools": world.openai_tools(task["tools"]),
                "temperature": 0,
                "messages": [{"role": "user", "content": task["question"]}],
            }
            service.chat(body)  # the prompt cached, as for both timed requests
            row = {"id": task["id"]}
            for mode in ("with", "without") if n % 2 == 0 else ("without", "with"):
                LlamaCppChatEngine._forced_tokens = modes[mode]
                started = time.perf_counter()
                reply = service.chat(body)
                row[mode] = round(time.perf_counter() - started, 3)
                message = reply.choices[0].message
                calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or ()]
                row[f"{mode}_reply"] = [message.content, calls]
            LlamaCppChatEngine._forced_tokens = with_drafts
            row["same"] = row["with_reply"] == row["without_reply"]
            rows.append(row)
            print(f"{task['id']}: {row['without']:.2f} s -> {row['with']:.2f} s", flush=True)
    means = {mode: statistics.mean(r[mode] for r in rows) for mode in modes}
    called = [r for r in rows if r["with_reply"][1]]
    summary = {
        "tasks": len(rows),
        "calling": len(called),
        "mean_without": means["without"],
        "mean_with": means["with"],
        "ratio": means["without"] / means["with"],
        "calling_mean_without": statistics.mean(r["without"] for r in called),
        "calling_mean_with": statistics.mean(r["with"] for r in called),
        "same_replies": sum(r["same"] for r in rows),
    }
    print(json.dumps(summary, indent=1))
    out = HERE / f"call-cost-{args.label}.json"
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
