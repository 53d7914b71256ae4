"""Starting an answer's generation, switching to a constrained tool call when one begins.

With ``tool_choice`` ``auto`` the model decides whether to call a tool. The answer is
generated freely until its first tokens show which it is; if they open a call, that free
start is dropped and the call is generated again from the tag, under the constraint that
makes it match a tool's schema (``backend.tool_call_constraint``). A plain answer continues
as it started, unconstrained and unslowed. Where the profile sets a check, a generated call
the model itself finds unneeded for the message is dropped and the message answered without
tools (``backend.call_check``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from backend.call_check import call_is_wanted
from backend.chat_prompt import RenderedPrompt
from backend.engines.base import ChatEngine, SamplingParams
from backend.tool_call_constraint import CALL_PREFILL
from backend.tool_calls import opens_tool_call, parse_tool_calls

#: Tokens read at most before deciding that an answer is not a call (a fence and ``{"name"``
#: take about six).
OPENING_TOKENS = 16


@dataclass
class StartedAnswer:
    """The generation to read: its prompt, the text prefilled in it, and its tokens.

    ``tools_offered`` is False when the answer was regenerated without tools (a call the
    check found unwanted): its text is then not read for calls.
    """

    prompt_ids: list[int]
    prefill: str
    tokens: Iterator[int]
    _generators: list[Iterator[int]] = field(default_factory=list)
    tools_offered: bool = True

    def close(self) -> None:
        for generator in self._generators:
            generator.close()  # type: ignore[attr-defined]


def start_answer(
    engine: ChatEngine,
    rendered: RenderedPrompt,
    params: SamplingParams,
    should_stop: Callable[[], bool],
    call_check_below: float | None = None,
) -> StartedAnswer:
    """Start the answer; with ``call_check_below``, a call that ``auto`` opened is kept only
    if the model finds the tool needed with at least that probability (``backend.call_check``).
    """
    if rendered.call_ids is None or rendered.call_constraint is None:
        options = {"constraint": rendered.constraint} if rendered.constraint else {}
        tokens = engine.generate(rendered.ids, params, should_stop, **options)
        return StartedAnswer(rendered.ids, rendered.prefill, tokens, [tokens])
    free = engine.generate(rendered.ids, params, should_stop)
    opening: list[int] = []
    is_call = None
    for token in free:
        opening.append(token)
        text = engine.tokenizer.decode(opening, skip_special_tokens=False)  # type: ignore[attr-defined]
        is_call = opens_tool_call(text)
        if is_call is not None or len(opening) >= OPENING_TOKENS:
            break
    if not is_call:
        return StartedAnswer(rendered.ids, "", itertools.chain(opening, free), [free])
    free.close()  # type: ignore[attr-defined]
    call = engine.generate(
        rendered.call_ids, params, should_stop, constraint=rendered.call_constraint
    )
    check = rendered.call_check
    if call_check_below is None or check is None:
        return StartedAnswer(rendered.call_ids, CALL_PREFILL, call, [call])
    # The call is read whole before it is checked (calls go out at the end anyway).
    call_tokens = list(call)
    text = engine.tokenizer.decode(call_tokens, skip_special_tokens=True)  # type: ignore[attr-defined]
    calls = parse_tool_calls(CALL_PREFILL + text, rendered.tool_names).tool_calls
    if not calls or call_is_wanted(engine, check, calls[0].function.name, call_check_below):
        return StartedAnswer(rendered.call_ids, CALL_PREFILL, iter(call_tokens))
    plain = engine.generate(check.plain_ids, params, should_stop)
    return StartedAnswer(check.plain_ids, "", plain, [plain], tools_offered=False)
