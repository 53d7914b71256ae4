"""Readings of the tool-need check's candidate questions on our own development cases.

``python -m benchmarks.eval.tool_need [--out FILE]`` generates each case's reply with the check
off; for each reply that calls a tool it reads P(yes) of every question in ``QUESTIONS`` (the
largest over the reply's calls, as ``calls_are_wanted`` keeps a reply whole). The cases are
``tool_need.jsonl`` (a related tool that does not answer the message, against one that does;
en/ko/ja) and ``tool_calls.jsonl`` (the tool-call evaluation set, ten of whose messages need no
tool). ``python -m benchmarks.eval.tool_need_choice FILE`` chooses a question and threshold by
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

QUESTIONS = {
    "tool": tool_need.QUESTION,
    "call": (
        "Message: {message}\n\nThe assistant would reply by calling {call}, where {name}: "
        "{description}\n\nDoes the result of this call answer what the message asks? "
        "Answer yes or no."
    ),
    "call_need": (
        "Message: {message}\n\nTo reply to this message, is it necessary to call {call}? "
        "({name}: {description}) Answer yes or no."
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
    return cases


def call_text(name: str, arguments: str) -> str:
    values = json.loads(arguments).items()
    return f"{name}({', '.join(f'{k}={json.dumps(v, ensure_ascii=False)}' for k, v in values)})"


def readings(reader: YesNoReader, case: dict, calls: list[tuple[str, str]]) -> dict:
    """Each question's P(yes), the largest over the reply's calls (None without a call)."""
    descriptions = {t["function"]["name"]: t["function"]["description"] for t in case["tools"]}
    read = {}
    for key, template in QUESTIONS.items():
        probabilities = []
        for name, arguments in calls:
            question = template.format(
                message=case["message"],
                name=name,
                description=descriptions[name],
                call=call_text(name, arguments),
            )
            conversation = [
                {"role": "system", "content": tool_need.SYSTEM},
                {"role": "user", "content": question},
            ]
            probabilities.append(reader.probability(reader.prompt_ids(conversation)))
        read[key] = max(probabilities) if probabilities else None
    return read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results-tool-need-default.jsonl"))
    args = parser.parse_args()
    client = backend.connect()
    service = client._chat_service.get()
    service._tool_need_below = None  # every generated call kept: the questions are read here
    reader = YesNoReader(service.engine)
    with open(args.out, "w", encoding="utf-8") as out:
        for case in load_cases():
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
            row |= {"called": calls, **readings(reader, case, calls)}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            print(json.dumps(row, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
