"""Checking that a tool call the model opened is what the user's message asks for.

With ``tool_choice`` ``auto`` small models call tools for messages that need none: the 1.5B
model answered a greeting with ``get_weather`` and "what is 17 times 3?" with a call it made
up, which the schema constraint then turns into a real tool. Once a call is generated, the
model is asked whether replying to the message needs that tool, and P(yes) is read
(``backend.chat.yes_no``); below the profile's threshold the call is dropped and the message
answered without tools. A reply of several calls is kept whole when any of its tools is found
needed, and dropped whole otherwise (``calls_are_wanted``): the question is about a tool, not
a call's arguments, and a reply cut to some of its calls would carry out part of a plan the
model made as one. The threshold is chosen by cross-validation over our own cases
(``benchmarks/eval/tool_need_choice.py``): messages whose related tool does not answer them
read close to those it does, so it sits midway between the nearest readings of the two. The
0.5B model's readings all sit near 0.5, so its profile has no check (the readings measured
are in benchmarks/README.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from backend.chat.yes_no import YesNoReader
from backend.engines.base import ChatEngine

#: P(yes) below which a call that ``tool_choice: auto`` generated is dropped as unwanted, per
#: model profile; None: no check.
TOOL_NEED_THRESHOLDS: dict[str, float | None] = {"default": 0.55, "small": None}

SYSTEM = "You are a helpful assistant. Answer yes or no."
QUESTION = (
    'Message: {message}\n\nTo reply to this message, is it necessary to use the tool "{name}" '
    "({description})? Answer yes or no."
)


@dataclass(frozen=True)
class ToolNeedCheck:
    """What the check needs from the request: its last user message and the tools'
    descriptions."""

    message: str
    descriptions: dict[str, str]


def call_is_wanted(engine: ChatEngine, check: ToolNeedCheck, name: str, threshold: float) -> bool:
    """Whether P(yes) that replying to the message needs tool ``name`` reaches ``threshold``."""
    reader = YesNoReader(engine)
    question = QUESTION.format(
        message=check.message, name=name, description=check.descriptions.get(name, "")
    )
    conversation = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    return reader.probability(reader.prompt_ids(conversation)) >= threshold


def calls_are_wanted(
    engine: ChatEngine, check: ToolNeedCheck, names: Iterable[str], threshold: float
) -> bool:
    """Whether a reply calling tools ``names`` is kept: some tool among them is needed (each
    tool asked about once, in order, until one is)."""
    return any(call_is_wanted(engine, check, name, threshold) for name in dict.fromkeys(names))
