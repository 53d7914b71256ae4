"""A failed call made again with its values written as the tool's error says, where the
model repeated it instead.

Asked how many units of the product in order o-1001 are in stock where it ships from, the
1.5B model called ``get_order("o-1001")``. The tool answered "unknown order id o-1001;
order ids look like O-1001", the model's state said the chain needs another call
(``backend.chat.chain_state``), and the call it opened was the same one again. The review
drops a repeat (``backend.chat.repeated_calls``), no other tool could take a value that step
found (``backend.chat.next_in_chain``), and the answer said the order does not exist.

So where every call of a reply repeats an answered one and the chain needs another, the
model is shown those calls again, each answered by the result it had and "Fix the arguments
as this says." (``correction_exchange``), in an exchange the client never sees, and calls
once more, held to the tools it repeated. A call of that reply is kept only where it writes
a repeated call's values again in another spelling (case, spaces, punctuation): ``O-1001``
for ``o-1001``, ``KE123`` for ``ke 123`` (``respells``). A value changed in more than its
spelling is not the user's: told "unknown order id O-5555; order ids look like O-1001", the
model may write ``O-1001``, the tool's example. Where nothing is kept, the next call of the
chain is asked for as before.

Shown its last step repeated so, at each of the 95 states of our development tasks'
solution chains, the model wrote a respelled call at one, the failed lookup above, and the
same call again at every other (benchmarks/README.md, "A failed call written again").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from backend.chat.repeated_calls import CallKey, call_key, parsed_arguments
from backend.protocol.schemas import ChatMessage, ToolCall

#: What the model is told of a call it repeated, after the result that call had.
CORRECTION = "{result}. Fix the arguments as this says."


def repeated_calls(calls: Sequence[ToolCall], answered: Mapping[CallKey, str]) -> list[ToolCall]:
    """The ``calls`` that repeat one the conversation answered (``answered``, by
    ``call_key``), each once."""
    return _each_once(calls, lambda call, key: key in answered)


def correction_exchange(
    repeats: Sequence[ToolCall], answered: Mapping[CallKey, str]
) -> list[ChatMessage]:
    """The repeated calls, each answered by the result the conversation holds for it and
    ``CORRECTION``: the model, shown this after the conversation, calls again."""
    results = [
        ChatMessage(
            role="tool",
            tool_call_id=call.id,
            content=CORRECTION.format(result=_sentence(answered[_key(call)])),
        )
        for call in repeats
    ]
    return [ChatMessage(role="assistant", content=None, tool_calls=list(repeats)), *results]


def respells(call: ToolCall, repeats: Sequence[ToolCall]) -> bool:
    """Whether ``call`` is one of ``repeats`` with some values written in another spelling
    and none changed otherwise: the same tool and arguments, where strings are compared
    casefolded and without spaces or punctuation."""
    arguments = parsed_arguments(call.function.arguments)
    return any(
        call.function.name == repeat.function.name
        and arguments != (repeated := parsed_arguments(repeat.function.arguments))
        and _spelling(arguments) == _spelling(repeated)
        for repeat in repeats
    )


def corrections(
    calls: Sequence[ToolCall], repeats: Sequence[ToolCall], answered: Mapping[CallKey, str]
) -> list[ToolCall]:
    """The ``calls`` that respell one of ``repeats`` (``respells``), each once, none the
    conversation answered. Not reviewed for made-up values: a respelled value is the
    repeated call's, which was (``C-7781`` for the ``c 7781`` the user wrote)."""
    return _each_once(calls, lambda call, key: key not in answered and respells(call, repeats))


def _each_once(
    calls: Sequence[ToolCall], keep: Callable[[ToolCall, CallKey], bool]
) -> list[ToolCall]:
    """The first of each of ``calls`` (by ``call_key``) that ``keep`` keeps."""
    kept: dict[CallKey, ToolCall] = {}
    for call in calls:
        if keep(call, key := _key(call)):
            kept.setdefault(key, call)
    return list(kept.values())


def _spelling(value: Any) -> Any:
    """``value`` with each string reduced to its letters and digits, casefolded."""
    if isinstance(value, str):
        return re.sub(r"[\W_]", "", value).casefold()
    if isinstance(value, dict):
        return {key: _spelling(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_spelling(item) for item in value]
    return value


def _key(call: ToolCall) -> CallKey:
    return call_key(call.function.name, call.function.arguments)


def _sentence(result: str) -> str:
    """``result`` without the full stop it may end with (``CORRECTION`` adds one)."""
    return result.strip().removesuffix(".")
