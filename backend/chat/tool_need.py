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

Where several tools are offered they are listed in the question. Asked about a lookup alone
("is it necessary to use find_employee_id?" for Lena Fischer's email) the model reads it as
unneeded, since the message asks for an email, not an id; shown the tool that takes the id
beside it, it reads the lookup as needed. With one tool there is nothing to list and the
question is asked as before. The two questions read on different scales, so each has its own
threshold (``ToolNeedThresholds``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from backend.chat.shown_tools import shown_description
from backend.chat.yes_no import YesNoReader
from backend.engines.base import ChatEngine


@dataclass(frozen=True)
class ToolNeedCheck:
    """What the check needs from the request: its last user message and the tools'
    descriptions."""

    message: str
    descriptions: dict[str, str]

    @property
    def among_tools(self) -> bool:
        """Whether the question lists the offered tools: more than one is offered."""
        return len(self.descriptions) > 1


@dataclass(frozen=True)
class ToolNeedThresholds:
    """P(yes) below which a call that ``tool_choice: auto`` generated is dropped as unwanted:
    read from ``QUESTION`` where one tool is offered, from ``QUESTION_AMONG_TOOLS`` where
    several are."""

    alone: float
    among_tools: float

    def for_check(self, check: ToolNeedCheck) -> float:
        return self.among_tools if check.among_tools else self.alone


#: Per model profile; None: no check.
TOOL_NEED_THRESHOLDS: dict[str, ToolNeedThresholds | None] = {
    "default": ToolNeedThresholds(alone=0.55, among_tools=0.59),
    "small": None,
}

SYSTEM = "You are a helpful assistant. Answer yes or no."
QUESTION = (
    'Message: {message}\n\nTo reply to this message, is it necessary to use the tool "{name}" '
    "({description})? Answer yes or no."
)
#: The message and the tools come first, so that the prompt asked about a second tool reuses
#: the first one's evaluated prefix.
QUESTION_AMONG_TOOLS = (
    "Message: {message}\n\nTools:\n{tool_list}\n\nTo reply to this message, is it "
    'necessary to use the tool "{name}"? Answer yes or no.'
)


def tool_list(descriptions: dict[str, str]) -> str:
    """The offered tools as ``QUESTION_AMONG_TOOLS`` lists them, one line each: the name and
    what the description says as the model is shown it (``backend.chat.shown_tools``: a
    signature line LlamaIndex writes above the docstring moved the readings enough to drop
    a lookup its message asked for and keep a weather call for a greeting)."""
    return "\n".join(f"- {name}: {_said(name, text)}" for name, text in descriptions.items())


def _said(name: str, description: str) -> str:
    shown = shown_description(name, description) or ""
    return " ".join(line.strip() for line in shown.splitlines() if line.strip())


def question(check: ToolNeedCheck, name: str) -> str:
    """What the model is asked about tool ``name``: alone, or among the offered tools."""
    if check.among_tools:
        listed = tool_list(check.descriptions)
        return QUESTION_AMONG_TOOLS.format(message=check.message, tool_list=listed, name=name)
    description = check.descriptions.get(name, "")
    return QUESTION.format(message=check.message, name=name, description=description)


def call_is_wanted(
    engine: ChatEngine, check: ToolNeedCheck, name: str, thresholds: ToolNeedThresholds
) -> bool:
    """Whether P(yes) that replying to the message needs tool ``name`` reaches the threshold
    of the question asked."""
    reader = YesNoReader(engine)
    conversation = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": question(check, name)},
    ]
    return reader.probability(reader.prompt_ids(conversation)) >= thresholds.for_check(check)


def calls_are_wanted(
    engine: ChatEngine, check: ToolNeedCheck, names: Iterable[str], thresholds: ToolNeedThresholds
) -> bool:
    """Whether a reply calling tools ``names`` is kept: some tool among them is needed (each
    tool asked about once, in order, until one is)."""
    return any(call_is_wanted(engine, check, name, thresholds) for name in dict.fromkeys(names))
