"""The readings ``backend.chat.call_after_results`` chose its share on: after each step of
each development task's solution chain, the share of probability the model gives a call's
opening (as the generation reads it, the first token of the answer with tools offered), its
likeliest first token, and the call it writes when it must call (``tool_choice``
``required``, greedy): the solution's next call, a repeat of an answered one, or another.
The calls are read as the review leaves them, those repeating an answered call dropped (a
reply of a repeat and the next call is the next call); ``call-share-default.jsonl`` was
written before that, reading the reply whole.

    python -m benchmarks.agents.call_share --out benchmarks/agents/call-share-default.jsonl

Development tasks only (``tasks.jsonl``); about ten minutes on 2 cores. A parallel task's
calls are one step; the others', one call a step.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

import torch

import backend
from backend.chat.call_after_results import call_opening_tokens
from backend.chat.generation import answer_events
from backend.chat.logprobs import TokenLogprobsReader
from backend.chat.output import ToolCallsFound
from backend.chat.prompt import render_prompt
from backend.chat.repeated_calls import answered_calls, call_key, last_reply_calls
from backend.chat.tool_calls import call_constraint
from backend.engines import sampling
from backend.engines.base import FavouredFirstToken, SamplingParams
from backend.protocol.schemas import ChatMessage, ToolDefinition
from benchmarks.agents import world
from benchmarks.agents.scoring import KINDS, TOOL_ORDERS, in_tool_order, load_tasks, of_kinds


def solution_states(task: dict[str, Any]):
    """Each state of the task's solution chain after a step's results: (step, whether
    another step follows, the messages, the next step's calls or None)."""
    solution = task.get("solution") or []
    steps = [solution] if task["kind"] == "parallel" else [[call] for call in solution]
    messages = [ChatMessage(role="user", content=task["question"])]
    for k, step in enumerate(steps, 1):
        calls = [
            {
                "id": f"call_{k}_{i}",
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c["args"], ensure_ascii=False),
                },
            }
            for i, c in enumerate(step)
        ]
        messages.append(ChatMessage(role="assistant", content=None, tool_calls=calls))
        for c, call in zip(step, calls, strict=True):
            result = world.call(c["name"], c["args"])
            messages.append(ChatMessage(role="tool", tool_call_id=call["id"], content=result))
        following = [(c["name"], c["args"]) for c in steps[k]] if k < len(steps) else None
        yield k, k < len(steps), list(messages), following


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated task kinds")
    parser.add_argument(
        "--tool-order",
        default="given",
        choices=TOOL_ORDERS,
        help="each task's tools as tasks.jsonl lists them, or reversed",
    )
    parser.add_argument(
        "--held-from-repeats",
        action="store_true",
        help="also write the call made when it is held to the tools the last step did not "
        "call (the same prompt, those tools' constraint): held, held_written, held_logprobs",
    )
    args = parser.parse_args()
    try:  # refused before the model loads and the output file is opened
        tasks = in_tool_order(of_kinds(load_tasks(), args.kinds), args.tool_order)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    client = backend.connect()
    engine = client._chat_service.get().engine
    tokenizer = engine.tokenizer
    opening = call_opening_tokens(tokenizer)
    describe = TokenLogprobsReader(tokenizer)
    ids = sorted(opening)
    seen: dict[str, Any] = {}
    choose_first = sampling.favoured_first_token

    def reading_first(logits, params, mask=None):
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        seen["share"] = float(logprobs[ids].exp().sum())
        seen["likeliest"] = tokenizer.decode([int(torch.argmax(logprobs))])
        return choose_first(logits, params, mask)

    sampling.favoured_first_token = reading_first
    reading = SamplingParams(max_new_tokens=1, first_token=FavouredFirstToken(opening, 2.0))
    with open(args.out, "w", encoding="utf-8") as out:
        for task in tasks:
            tools = [ToolDefinition.model_validate(t) for t in world.openai_tools(task["tools"])]
            for k, more, messages, following in solution_states(task):
                prompt = render_prompt(tokenizer, messages, tools, None, constrained=True)
                list(engine.generate(prompt.answer.ids, reading))
                forced = render_prompt(tokenizer, messages, tools, "required", constrained=True)
                kind, written, _ = forced_call(engine, forced, messages, following)
                row = {"id": task["id"], "step": k, "more": more, **seen, "forced": kind}
                row["written"] = written
                last = {call.function.name for call in last_reply_calls(messages)}
                others = [t for t in tools if t.function.name not in last]
                if args.held_from_repeats and others:
                    held = call_constraint(others, forced.parallel_calls)
                    held_prompt = dataclasses.replace(forced, constraint=held)
                    row["held"], row["held_written"], row["held_logprobs"] = forced_call(
                        engine, held_prompt, messages, following, describe
                    )
                print(json.dumps(row, ensure_ascii=False), file=out, flush=True)


def forced_call(engine, prompt, messages, following, describe=None) -> tuple[str, list, dict]:
    """The call the model writes greedily from ``prompt`` (a forced call), whether it is the
    solution's next one (``next``), a repeat of an answered one, or another, and with
    ``describe`` (a ``TokenLogprobsReader``) the mean and least log-probability of its
    tokens."""
    params = SamplingParams(max_new_tokens=200, top_logprobs=0 if describe else None)
    events = list(answer_events(engine, prompt, params, (), lambda: False, logprobs=describe))
    entries = [entry.logprob for e in events for entry in getattr(e, "logprobs", ())]
    read = {"mean": sum(entries) / len(entries), "least": min(entries)} if entries else {}
    found = [c for e in events if isinstance(e, ToolCallsFound) for c in e.calls]
    written = [(c.function.name, json.loads(c.function.arguments)) for c in found]
    return call_kind(written, messages, following), written, read


def call_kind(written: list, messages: list[ChatMessage], following: list | None) -> str:
    """``next`` where the calls ``written``, less those repeating a call ``messages`` answered,
    are the solution's ``following`` ones; ``repeat`` where none is left; else ``other``."""
    answered = answered_calls(messages)
    new = [
        [name, args] for name, args in written if call_key(name, json.dumps(args)) not in answered
    ]
    if not new:
        return "repeat"
    return "next" if following is not None and new == [list(c) for c in following] else "other"


if __name__ == "__main__":
    main()
