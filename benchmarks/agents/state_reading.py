"""Whether the model's hidden state tells a chain state that needs another call from a done
one (issue 50, the reading s15 and s16 asked for): at each state of each development task's
solution chain (``call_share.solution_states``), in the tool orders of ``READ_ORDERS``, the
model's final hidden state at the answer's first position of the agent prompt (tools
offered, as the generation reads it) and the share of a call's opening; with ``--question``
also the hidden state and P(yes) at the answer of a yes/no question ("Do these results
already give everything needed to answer the question?"). A logistic regression over each
hidden state is scored leave-one-task-out (a task's states in every order left out
together), for several regularisation strengths. The reading shipped
(``backend.chat.chain_state``) is fitted on these states by ``train_chain_state``.

    python -m benchmarks.agents.state_reading --out benchmarks/.state-reading.npz

Development tasks only (``tasks.jsonl``); about 11 minutes on 2 cores for the 198 states
(twice that with ``--question``). With ``--scores-only`` the readings already in ``--out``
are scored again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.agents.scoring import in_tool_order, load_tasks

COMPLETE = (
    "Question: {question}\n\nTool results so far:\n{results}\n\nDo these results already give "
    "everything needed to answer the question? Answer yes or no."
)
YES_NO_SYSTEM = "You are a helpful assistant. Answer yes or no."


def _results(messages) -> str:
    """The chain's calls and results so far, one line each."""
    lines, calls = [], {}
    for message in messages[1:]:
        if message.role == "assistant":
            calls.update({call.id: call.function for call in message.tool_calls})
        elif message.role == "tool":
            called = calls[message.tool_call_id]
            lines.append(f"- {called.name}({called.arguments}) -> {message.content}")
    return "\n".join(lines)


#: The tool orders read: as listed, reversed and a seeded shuffle, so that a reading
#: learns the chain's state rather than where the next tool sits in the list.
READ_ORDERS = (("given", 0), ("reversed", 0), ("shuffled", 1))


def read_states(out: Path, question: bool) -> None:
    import backend
    from backend.chat.call_after_results import call_opening_tokens
    from backend.chat.prompt import render_prompt
    from backend.chat.yes_no import YesNoReader
    from backend.protocol.schemas import ToolDefinition
    from benchmarks.agents import world
    from benchmarks.agents.call_share import solution_states

    client = backend.connect()
    engine = client._chat_service.get().engine
    reader = YesNoReader(engine)
    opening = sorted(call_opening_tokens(engine.tokenizer))
    rows, agent, asked_states = [], [], []
    for order, seed in READ_ORDERS:
        for task in in_tool_order(load_tasks(), order, seed):
            tools = [ToolDefinition.model_validate(t) for t in world.openai_tools(task["tools"])]
            for step, more, messages, _ in solution_states(task):
                prompt = render_prompt(engine.tokenizer, messages, tools, None, constrained=True)
                logprobs, hidden = engine.reading_before_generation(prompt.answer.ids, opening)
                row = {
                    "id": task["id"],
                    "order": f"{order}-{seed}" if order == "shuffled" else order,
                    "step": step,
                    "more": more,
                    "share": float(np.exp(logprobs).sum()),
                }
                agent.append(hidden)
                if question:
                    asked = COMPLETE.format(question=task["question"], results=_results(messages))
                    conversation = [
                        {"role": "system", "content": YES_NO_SYSTEM},
                        {"role": "user", "content": asked},
                    ]
                    [(p_complete, _, asked_hidden)] = reader.read_many_with_hidden([conversation])
                    row["p_complete"] = p_complete
                    asked_states.append(asked_hidden)
                rows.append(row)
                print(json.dumps(row), flush=True)
    stored = {"agent": np.array(agent), "rows": json.dumps(rows)}
    if question:
        stored["question"] = np.array(asked_states)
    np.savez(out, **stored)


def score(out: Path) -> None:
    from sklearn.metrics import roc_auc_score

    from benchmarks.agents.train_chain_state import C_GRID, out_of_task

    stored = np.load(out)
    rows = json.loads(str(stored["rows"]))
    needed = np.array([row["more"] for row in rows], dtype=int)
    ids = np.array([row["id"] for row in rows])
    orders = np.array([row["order"] for row in rows])
    print(f"{len(rows)} states, {needed.sum()} needing another call")
    for name in [name for name in ("agent", "question") if name in stored.files]:
        states = stored[name].astype(np.float64)
        for strength in C_GRID:
            scores = out_of_task(states, needed, ids, strength)
            by_order = {
                str(o): f"{roc_auc_score(needed[orders == o], scores[orders == o]):.3f}"
                for o in sorted(set(orders))
            }
            missed = int((scores[needed == 1] < 0.5).sum())
            unneeded = int((scores[needed == 0] >= 0.5).sum())
            print(
                f"{name} C={strength}: AUC {roc_auc_score(needed, scores):.3f} "
                f"(by order {by_order}); at 0.5, needed "
                f"states missed {missed}/{needed.sum()}, done states called "
                f"{unneeded}/{len(rows) - needed.sum()}"
            )
    for reading, sign in (("share", 1), ("p_complete", -1)):
        if reading not in rows[0]:
            continue
        values = sign * np.array([row[reading] for row in rows])
        print(f"{reading}: AUC {roc_auc_score(needed, values):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scores-only", action="store_true")
    parser.add_argument(
        "--question", action="store_true", help="also read the yes/no question (twice the time)"
    )
    args = parser.parse_args()
    if not args.scores_only:
        read_states(args.out, args.question)
    score(args.out)


if __name__ == "__main__":
    main()
