"""How often LangChain's standard agent-loop and JSON-mode requests, sampled at temperature
0.7 as a new user builds the model, come back as the model most likely writes them: one tool
call, and exactly the two asked keys.

python -m benchmarks.sampled_structure [--runs 100] [--drawn]

``--drawn`` draws JSON structure at the temperature as values are (the sampling before
structure was taken greedily), for the figure it is compared with.
"""

from __future__ import annotations

import argparse
import contextlib
from unittest import mock

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field
from tqdm import tqdm

JOKE_REQUEST = (
    "Tell me a joke about cats. Return the result as a JSON with 'setup' and "
    "'punchline' keys. Return nothing other than JSON."
)


class Joke(BaseModel):
    """Joke to tell user."""

    setup: str = Field(description="question to set up a joke")
    punchline: str = Field(description="answer to resolve the joke")


@tool
def get_weather(location: str) -> str:
    """Get the weather at a location."""
    return "It's sunny."


def _drawn_structure(logits, params, mask, generator):
    from backend.engines.sampling import sample_token

    return sample_token(logits, params.temperature, params.top_p, generator)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--drawn", action="store_true")
    args = parser.parse_args(argv)

    from backend.backends.local import InProcessBackend
    from langchain_core_ext import ChatCore

    backend = InProcessBackend(profile="small")
    model = ChatCore(model="core-1-mini-chat", backend=backend)
    patch = (
        mock.patch("backend.engines.sampling._sample_values", _drawn_structure)
        if args.drawn
        else contextlib.nullcontext()
    )
    with patch:
        with_tools = model.bind_tools([get_weather])
        question = HumanMessage("What is the weather in San Francisco, CA?")
        calls = [
            len(with_tools.invoke([question]).tool_calls)
            for _ in tqdm(range(args.runs), desc="agent loop")
        ]
        json_mode = model.with_structured_output(Joke.model_json_schema(), method="json_mode")
        keys = [
            sorted(json_mode.invoke(JOKE_REQUEST)) for _ in tqdm(range(args.runs), desc="json mode")
        ]
    label = "structure drawn" if args.drawn else "structure greedy"
    one_call = sum(count == 1 for count in calls)
    counts = {n: calls.count(n) for n in sorted(set(calls))}
    print(f"{label}: agent loop, exactly one call in {one_call}/{args.runs} (counts {counts})")
    two_keys = sum(k == ["punchline", "setup"] for k in keys)
    print(f"{label}: json mode, exactly setup and punchline in {two_keys}/{args.runs}")
    backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
