"""The answer written where a chain is done: at the last state of each development task's
solution chain (``call_share.solution_states``), the plain prompt (the results without
tools, ``backend.chat.prompt``) is answered greedily and scored as the agent loops score
their final answers (``scoring.answer_has``). It measures the answer alone, apart from the
loop's choices of calls, so that how results are shown to the model can be chosen on it.

    python -m benchmarks.agents.done_answers --tasks dev,lookups,yes_no --label s32

Development sets only (``scoring.TASK_SETS``; ``heldout`` is refused); about 3 minutes on 2
cores for the three sets' 66 states. Writes ``done-answers-<label>.json`` beside this file.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.agents.scoring import TASK_SETS, answer_has, load_tasks

HERE = Path(__file__).resolve().parent


def done_states(sets: list[str]):
    """(set, task, messages) at the last state of each task's solution chain."""
    from benchmarks.agents.call_share import solution_states

    for name in sets:
        for task in load_tasks(TASK_SETS[name]):
            last = None
            for _, more, messages, _ in solution_states(task):
                if not more:
                    last = messages
            if last is not None:
                yield name, task, last


def answer_all(sets: list[str], label: str) -> dict:
    import backend
    from backend.chat.prompt import render_prompt
    from backend.engines.base import SamplingParams
    from backend.protocol.schemas import ToolDefinition
    from benchmarks.agents import world

    engine = backend.connect()._chat_service.get().engine
    params = SamplingParams(max_new_tokens=160, draft_from_prompt=True, continued_later=False)
    rows = []
    for name, task, messages in done_states(sets):
        tools = [ToolDefinition.model_validate(t) for t in world.openai_tools(task["tools"])]
        prompt = render_prompt(engine.tokenizer, messages, tools, None, constrained=True)
        started = time.perf_counter()
        tokens = []
        for token in engine.generate(prompt.plain.ids, params):
            if token in engine.eos_token_ids:
                break
            tokens.append(token)
        answer = engine.tokenizer.decode(tokens, skip_special_tokens=True)
        rows.append(
            {
                "set": name,
                "id": task["id"],
                "kind": task["kind"],
                "has_expected": answer_has(answer, task["expect"]),
                "answer": answer,
                "prompt_tokens": len(prompt.plain.ids),
                "answer_tokens": len(tokens),
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
        mark = "ok  " if rows[-1]["has_expected"] else "MISS"
        print(f"{mark} {task['id']:<22} {answer[:110]!r}", flush=True)
    by_set = {}
    for name in sets:
        held = [row["has_expected"] for row in rows if row["set"] == name]
        by_set[name] = [sum(held), len(held)]
    return {"label": label, "sets": sets, "by_set": by_set, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="dev,lookups,yes_no")
    parser.add_argument("--label", required=True)
    args = parser.parse_args()
    sets = [name.strip() for name in args.tasks.split(",") if name.strip()]
    if "heldout" in sets or any(name not in TASK_SETS for name in sets):
        raise SystemExit(f"development sets only: {sorted(set(TASK_SETS) - {'heldout'})}")
    summary = answer_all(sets, args.label)
    for name, (held, total) in summary["by_set"].items():
        print(f"{name}: {held} of {total} answers hold the expected values")
    seconds = [row["seconds"] for row in summary["rows"]]
    print(f"mean s a state: {sum(seconds) / len(seconds):.2f}")
    out = HERE / f"done-answers-{args.label}.json"
    out.write_text(json.dumps(summary, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
