"""Readings of the tool-need check's candidate questions on our own development cases.

``python -m benchmarks.eval.tool_need [--out FILE]`` generates each case's reply with the check
off; for each reply that calls a tool it reads P(yes) of every question in ``QUESTIONS`` (the
largest over the reply's calls, as ``calls_are_wanted`` keeps a reply whole). The cases are
``tool_need.jsonl`` (a related tool that does not answer the message, against one that does;
en/ko/ja) and ``tool_calls.jsonl`` (the tool-call evaluation set, ten of whose messages need no
tool) and the first step of each development agent task (``benchmarks/agents/tasks.jsonl``:
lookups by name, chains, questions that need no tool; its held-out twin is never read here).
``python -m benchmarks.eval.tool_need_choice FILE`` chooses a question and threshold by
cross-validation over these rows. BFCL's irrelevance categories are held out: never read here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import backend
from backend.chat import tool_need
from backend.chat.yes_no import YesNoReader

HERE = Path(__file__).parent

#: Each question is read per call (the largest P(yes) over the reply's calls), except those
#: without ``{name}``, read once per message. ``KNOWN`` asks the opposite way round: what is
#: stored for it is P(no), the model's doubt that it can answer alone.
KNOWN = "known"
QUESTIONS = {
    "tool": tool_need.QUESTION,
    KNOWN: (
        "Message: {message}\n\nCan you reply to this message correctly from your own knowledge "
        "alone, without looking anything up? Answer yes or no."
    ),
    "tools_any": (
        "Message: {message}\n\nTools:\n{tool_list}\n\nTo reply to this message, is it "
        "necessary to use one of these tools? Answer yes or no."
    ),
    "call": (
        "Message: {message}\n\nThe assistant would reply by calling {call}, where {name}: "
        "{description}\n\nDoes the result of this call answer what the message asks? "
        "Answer yes or no."
    ),
    "call_need": (
        "Message: {message}\n\nTo reply to this message, is it necessary to call {call}? "
        "({name}: {description}) Answer yes or no."
    ),
    # The check's question where several tools are offered (s11).
    "tool_listed": tool_need.QUESTION_AMONG_TOOLS,
    "tool_chain": (
        "Message: {message}\n\nTools:\n{tool_list}\n\nTo reply to this message, is it "
        'necessary to use the tool "{name}", either for the reply itself or to find a value '
        "that another of these tools needs? Answer yes or no."
    ),
}


def load_cases() -> list[dict]:
    """Both case files in one shape: message, tools (full definitions), needed."""
    cases = [json.loads(line) for line in (HERE / "tool_need.jsonl").open(encoding="utf-8")]
    definitions = {
        t["function"]["name"]: t for t in json.loads((HERE / "tools.json").read_text("utf-8"))
    }
    for line in (HERE / "tool_calls.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        cases.append(
            {
                "id": row["id"],
                "language": row["language"],
                "message": row["prompt"],
                "tools": [definitions[name] for name in row["tools"]],
                "needed": row["expected"] is not None,
            }
        )
    cases += agent_cases()
    return cases


def agent_cases() -> list[dict]:
    """The development agent tasks' questions with their offered tools; a tool is needed
    unless the task is one that needs none."""
    from benchmarks.agents.scoring import TASK_SETS, load_tasks
    from benchmarks.agents.world import openai_tools

    return [
        {
            "id": task["id"],
            "language": task["lang"],
            "message": task["question"],
            "tools": openai_tools(task["tools"]),
            "needed": task["kind"] != "no_tool",
        }
        for task in load_tasks(TASK_SETS["dev"])
    ]


def call_text(name: str, arguments: str) -> str:
    values = json.loads(arguments).items()
    return f"{name}({', '.join(f'{k}={json.dumps(v, ensure_ascii=False)}' for k, v in values)})"


#: A reading of the check's question about every offered tool, not only the called ones (the
#: largest): a lookup the message does not name ("find_customer_id" for a customer's balance)
#: reads low on its own while the tool it serves reads high.
OFFERED = "tool_offered"


def readings(
    reader: YesNoReader, case: dict, calls: list[tuple[str, str]], known: dict | None = None
) -> dict:
    """Each question's P(yes), the largest over the reply's calls (None without a call);
    readings in ``known`` are kept rather than read again."""
    descriptions = {t["function"]["name"]: t["function"]["description"] for t in case["tools"]}
    tool_list = tool_need.tool_list(descriptions)

    def probability(template: str, name: str = "", arguments: str = "{}") -> float:
        question = template.format(
            message=case["message"],
            name=name,
            description=descriptions.get(name, ""),
            call=call_text(name, arguments) if name else "",
            tool_list=tool_list,
        )
        conversation = [
            {"role": "system", "content": tool_need.SYSTEM},
            {"role": "user", "content": question},
        ]
        return reader.probability(reader.prompt_ids(conversation))

    read = dict(known or {})
    for key, template in QUESTIONS.items():
        if key in read:
            continue
        if not calls:
            read[key] = None
        elif "{name}" not in template:
            read[key] = probability(template)
            if key == KNOWN:
                read[key] = 1.0 - read[key]
        else:
            read[key] = max(probability(template, *call) for call in calls)
    if OFFERED not in read:
        offered = (probability(tool_need.QUESTION, name) for name in descriptions)
        read[OFFERED] = max(offered) if calls else None
    return read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results-tool-need-default.jsonl"))
    parser.add_argument(
        "--calls-from",
        help="an earlier output: its replies are reused instead of generated, and only the "
        "readings it lacks are read",
    )
    args = parser.parse_args()
    earlier = {}
    if args.calls_from:
        for line in open(args.calls_from, encoding="utf-8"):
            row = json.loads(line)
            earlier[row["id"]] = row
    client = backend.connect()
    service = client._chat_service.get()
    service._tool_need_below = None  # every generated call kept: the questions are read here
    reader = YesNoReader(service.engine)
    with open(args.out, "w", encoding="utf-8") as out:
        for case in load_cases():
            if case["id"] in earlier:
                row = earlier[case["id"]]
                calls = [tuple(call) for call in row["called"]]
                kept = {k: v for k, v in row.items() if k in QUESTIONS or k == OFFERED}
                row |= readings(reader, case, calls, kept)
                row["tools_offered"] = len(case["tools"])
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                continue
            request = {
                "model": "core-1-mini-chat",
                "messages": [{"role": "user", "content": case["message"]}],
                "tools": case["tools"],
                "temperature": 0,
                "max_tokens": 80,
            }
            reply = client.chat(request).choices[0].message
            calls = [(c.function.name, c.function.arguments) for c in reply.tool_calls or ()]
            row = {key: case[key] for key in ("id", "language", "needed")}
            row |= {"called": calls, "tools_offered": len(case["tools"])}
            row |= readings(reader, case, calls)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            print(json.dumps(row, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
