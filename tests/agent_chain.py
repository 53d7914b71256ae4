"""A chain of two dependent tool calls that the agent-loop tests share: find a customer's id
by name, then the balance by that id (issue 50, "agents that chain tools").

``ChainEngine`` plays a model that chains them correctly, deciding from what its prompt shows
(the ``CharTokenizer`` template prints every message's content, tool results included), so a
framework's loop is tested with the model's choices fixed: no result yet -> it calls
``find_customer``; the id in a result -> it calls ``get_balance`` with that id; the balance
in a result -> it answers. Its calls come only from the constrained generation, as a real
model's do where calls are constrained (``backend.chat.generation``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np

from backend.chat.call_after_results import CALL_AFTER_RESULTS_FROM
from backend.chat.generation import answer_events
from backend.chat.output import TextDelta, ToolCallsFound
from backend.chat.prompt import render_prompt
from backend.engines.base import ChatEngine, JSONSchemaConstraint, SamplingParams
from backend.groundedness.learned import LearnedReading
from backend.protocol.schemas import ChatMessage, ToolDefinition
from backend.testing import ScriptedChatEngine

QUESTION = "What is the balance of customer Jun Seo?"
CUSTOMER_IDS = {"jun seo": "C-7781"}
BALANCES = {"C-7781": "1250 EUR"}
#: The example id of ``get_balance``'s description: a model that copies it skips the lookup.
EXAMPLE_ID = "C-1234"
FIND_CUSTOMER_DESCRIPTION = "Find a customer's id by the customer's name."
GET_BALANCE_DESCRIPTION = (
    f"The account balance of a customer, by customer id (an id such as {EXAMPLE_ID})."
)
#: The two calls a correct chain makes, in order: the id is the one the first result gave.
EXPECTED_CALLS = [
    ("find_customer", {"name": "Jun Seo"}),
    ("get_balance", {"customer_id": "C-7781"}),
]
#: What ``ChainEngine`` answers once it has the balance.
ANSWER = "Jun Seo (C-7781) has a balance of 1250 EUR."

_FOUND_ID = re.compile(r"customer id (C-\d+)")
_FOUND_BALANCE = re.compile(r"balance of (C-\d+): (\d+ EUR)")


def find_customer(name: str) -> str:
    customer_id = CUSTOMER_IDS.get(name.strip().casefold())
    return f"{name}: customer id {customer_id}" if customer_id else f"no customer named {name}"


def get_balance(customer_id: str) -> str:
    balance = BALANCES.get(customer_id.strip().upper())
    if balance is None:
        return f"unknown customer id {customer_id}"
    return f"balance of {customer_id}: {balance}"


TOOL_FUNCTIONS: dict[str, Callable[..., str]] = {
    "find_customer": find_customer,
    "get_balance": get_balance,
}


def _definition(name: str, description: str, parameter: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {parameter: {"type": "string"}},
                "required": [parameter],
            },
        },
    }


#: The two tools as an OpenAI request's ``tools``.
TOOLS = [
    _definition("find_customer", FIND_CUSTOMER_DESCRIPTION, "name"),
    _definition("get_balance", GET_BALANCE_DESCRIPTION, "customer_id"),
]


def call_text(*calls: tuple[str, dict[str, Any]]) -> str:
    """What a constrained call generation writes for ``calls``: one object, or an array."""
    objects = [{"name": name, "arguments": arguments} for name, arguments in calls]
    return json.dumps(objects[0] if len(objects) == 1 else objects)


class PromptScriptedEngine(ScriptedChatEngine):
    """A scripted engine that constrains, whose reply is ``script(prompt, constrained)``: the
    prompt's text, and whether this generation is the constrained one (a call)."""

    def __init__(self, script: Callable[[str, bool], str]) -> None:
        super().__init__("", constrains=True)
        self.script = script

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
        constraint: JSONSchemaConstraint | None = None,
    ) -> Generator[int, None, None]:
        self.reply = self.script(self.tokenizer.decode(prompt_ids), constraint is not None)
        yield from super().generate(prompt_ids, params, should_stop, constraint)

    def prompt_texts(self) -> list[str]:
        """The text of every prompt generated from, in order."""
        return [self.tokenizer.decode(ids) for ids in self.prompts]


def chain_script(prompt: str, constrained: bool) -> str:
    """``ChainEngine``'s choices (see the module's docstring)."""
    balance = _FOUND_BALANCE.search(prompt)
    if balance:
        return f"Jun Seo ({balance[1]}) has a balance of {balance[2]}."
    found = _FOUND_ID.search(prompt)
    if not constrained:
        return "<tool_call>\n"  # opens a call; the call itself is the constrained generation
    if found:
        return call_text(("get_balance", {"customer_id": found[1]}))
    return call_text(("find_customer", {"name": "Jun Seo"}))


#: A chain-state reading of a one-number hidden state (``backend.chat.chain_state``):
#: another call is needed where the number is positive.
SIGN_READING = LearnedReading(np.array([1.0]), p_yes_weight=0.0, bias=0.0)


class StateReadingEngine(PromptScriptedEngine):
    """A ``PromptScriptedEngine`` that exposes hidden states: read by ``SIGN_READING``, every
    prompt is a chain that needs another call (``needed``) or a done one, with a call's
    openings holding ``share`` of the probability."""

    reads_hidden_states = True

    def __init__(self, script: Callable[[str, bool], str], needed: bool, share: float) -> None:
        super().__init__(script)
        self.needed, self.share = needed, share

    def next_token_readings_many(self, prompts, candidate_ids):
        each = math.log(self.share / len(candidate_ids))
        hidden = np.array([3.0 if self.needed else -3.0])
        return [([each] * len(candidate_ids), hidden) for _ in prompts]


def answer_read_by_state(
    engine: ChatEngine, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    """The answer's (content, [(name, arguments)]) with the default profile's share rule and
    ``SIGN_READING`` as the chain-state reading, greedy."""
    prompt = render_prompt(
        engine.tokenizer,
        [ChatMessage.model_validate(m) for m in messages],
        [ToolDefinition.model_validate(t) for t in tools],
        None,
        constrained=True,
    )
    params = SamplingParams(max_new_tokens=200, temperature=0.0)
    share = CALL_AFTER_RESULTS_FROM["default"]
    events = list(
        answer_events(engine, prompt, params, (), lambda: False, None, None, share, SIGN_READING)
    )
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = [
        (c.function.name, json.loads(c.function.arguments))
        for e in events
        if isinstance(e, ToolCallsFound)
        for c in e.calls
    ]
    return text or None, calls


class ChainEngine(PromptScriptedEngine):
    """A model that chains ``find_customer`` and ``get_balance`` and then answers."""

    def __init__(self) -> None:
        super().__init__(chain_script)
