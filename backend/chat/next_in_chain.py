"""The next call of a chain, asked for again when the model repeats the call it just made.

After tool results the 1.5B model, when it opens a call, often writes the last step's call
again; the review drops it (``backend.chat.repeated_calls``), and the answer written without
tools ends a chain that needed one more step. Which call it writes depends on the order the
tools are offered in: over the states of our development tasks' solution chains where
another call is needed, forced to call it writes the next one in 20 of 22 with the tools
listed in the order the chain calls them, and in 13 of 22 with them reversed, where 8 of the
other 9 repeat the last call (benchmarks/README.md, "The order tools are offered in").

So where the chain-state reading finds another call needed (``backend.chat.chain_state``)
and every call of the reply repeats an answered one, the model calls once more, held to the
tools the last step did not call, and a call of that reply is kept only where an argument
takes a value that the last step's results gave and nothing said before them did: the next
step of a dependent chain uses what the last step found (``get_account_balance("C-4821")``
after ``find_customer_id`` returned ``C-4821``). A result of several words passed on whole
is no found value: given "no train from Osaka to Seoul", the model asked for the status of
that train, and of each answer's text in turn, until the agent's limit. Without the reading
(s16) the held call was made at done states too, where it converted a temperature no one
asked about or looked up orders after the answer was in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from backend.chat.made_up_arguments import conversation_text
from backend.chat.repeated_calls import last_reply_calls, parsed_arguments
from backend.protocol.schemas import ChatMessage, ToolCall, ToolDefinition


@dataclass(frozen=True)
class LastStep:
    """The step a conversation ends with: the tools its reply called, what their results
    say, and what the conversation said before them (the call arguments included), both
    casefolded."""

    tools: frozenset[str]
    found: str
    before: str
    #: Each result whole, casefolded and stripped.
    results: frozenset[str] = frozenset()

    def other_tools(self, tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
        """The offered ``tools`` this step did not call: what the next call is held to."""
        return [tool for tool in tools if tool.function.name not in self.tools]

    def takes_found_value(self, call: ToolCall) -> bool:
        """Whether an argument of ``call`` is a value the step's results gave and nothing
        before them said (a number written as a whole number where it is one)."""
        values = (_written(value) for value in scalars(parsed_arguments(call.function.arguments)))
        return any(self._found_first(value) for value in values if value)

    def _found_first(self, value: str) -> bool:
        passed_on = value in self.results and any(c.isspace() for c in value)
        return _holds(self.found, value) and not _holds(self.before, value) and not passed_on


def last_step(messages: Sequence[ChatMessage]) -> LastStep | None:
    """The conversation's last step, where it ends in the results of a reply's calls."""
    calls = last_reply_calls(messages)
    if not calls:
        return None
    end = len(messages)
    while messages[end - 1].role == "tool":
        end -= 1
    return LastStep(
        tools=frozenset(call.function.name for call in calls),
        found=conversation_text(messages[end:]).casefold(),
        before=conversation_text(messages[:end]).casefold(),
        results=frozenset((m.content or "").strip().casefold() for m in messages[end:]),
    )


def scalars(value: Any) -> Iterator[Any]:
    """The strings and numbers in an argument value, however deeply nested."""
    if isinstance(value, dict):
        for item in value.values():
            yield from scalars(item)
    elif isinstance(value, list):
        for item in value:
            yield from scalars(item)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield value


def _written(value: str | int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip().casefold()


def _holds(text: str, value: str) -> bool:
    """Whether ``text`` holds ``value`` as a whole: not inside a longer word or number
    (``C-48`` is not in ``C-4821``, ``1250`` is in ``1250.00 USD``)."""
    return re.search(rf"(?<![\w.]){re.escape(value)}(?!\w)", text) is not None
