"""What the step after a tool result costs where the model answers at once: the request an
agent sends once the result of a task's only call is in, timed after the request that made
the call (so the engine holds that prompt as an agent loop leaves it).

Run from a checkout of the code to measure (it imports ``backend`` from the working
directory), once per version compared, on an otherwise idle machine:

    python -m benchmarks.agents.step_cost --label after
    (cd ../old-checkout && python /path/to/benchmarks/agents/step_cost.py --label before)

Tasks: the development set's ``one_step`` and ``immediate`` ones, with their solution's call
and the world's result. Prints the mean and median seconds of the answering step and writes
``benchmarks/agents/step-cost-<label>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the tasks and world of this checkout

from benchmarks.agents import world  # noqa: E402
from benchmarks.agents.scoring import load_tasks  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--profile", default="default", choices=["default", "small"])
    args = parser.parse_args()
    sys.path.remove(str(HERE.parents[1]))
    sys.path.insert(0, str(Path.cwd()))  # the backend measured: the working directory's
    import backend

    tasks = [t for t in load_tasks() if t["kind"] in ("one_step", "immediate")]
    rows = []
    with backend.connect(profile=args.profile) as service:
        for task in tasks:
            tools = world.openai_tools(task["tools"])
            [call] = task["solution"][:1]
            asked = [{"role": "user", "content": task["question"]}]
            body = {"model": "core-1-mini-chat", "tools": tools, "temperature": 0}
            service.chat({**body, "messages": asked})  # the step that called, as in a loop
            arguments = json.dumps(call["args"], ensure_ascii=False)
            messages = asked + [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": call["name"], "arguments": arguments},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1",
                    "content": world.call(call["name"], call["args"]),
                },
            ]
            started = time.perf_counter()
            reply = service.chat({**body, "messages": messages})
            seconds = time.perf_counter() - started
            message = reply.choices[0].message
            rows.append(
                {
                    "id": task["id"],
                    "seconds": round(seconds, 2),
                    "called_again": bool(message.tool_calls),
                    "completion_tokens": reply.usage.completion_tokens,
                    "answer": message.content,
                }
            )
            print(f"{task['id']}: {seconds:.2f} s", flush=True)
    times = [r["seconds"] for r in rows]
    summary = {"mean": statistics.mean(times), "median": statistics.median(times)}
    print(f"{args.label}: mean {summary['mean']:.2f} s, median {summary['median']:.2f} s")
    out = HERE / f"step-cost-{args.label}.json"
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
