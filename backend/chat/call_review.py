"""Which calls of a generated reply are made, and the calls made again where none is.

The review (``review``) takes out calls not worth making: repeats of answered calls or of the
reply's own (``backend.chat.repeated_calls``), calls with made-up arguments
(``backend.chat.made_up_arguments``) and calls that give a code to a tool beside a lookup of
that code (``backend.chat.lookup_beside``); optional numbers no message states are taken out
of a call (``backend.chat.unstated_options``). Where it keeps none, the model calls again, in
an exchange the client never sees:

* every call repeated an answered one where the chain needs another: shown failing, a call
  written again in another spelling is kept (``corrected_call``); else the next call of the
  chain, held to the tools the last step did not call (``next_in_chain_call``);
* every call made up an argument: shown failing as a tool would answer them, the model calls
  once more (``call_after_made_up``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from backend.chat.corrected_calls import correction_exchange, corrections, repeated_calls
from backend.chat.lookup_beside import waiting_for_lookup
from backend.chat.made_up_arguments import (
    UnfoundedCall,
    respaced_arguments,
    tools_giving_every,
    unfounded_arguments,
    unfounded_exchange,
)
from backend.chat.next_in_chain import LastStep
from backend.chat.output import OutputEvent, ToolCallsFound
from backend.chat.prompt import AnswerOrCall, Generation
from backend.chat.reading import DescribeToken, Reading
from backend.chat.repeated_calls import call_key
from backend.chat.tool_calls import call_constraint
from backend.chat.unstated_options import without_unstated_options
from backend.engines.base import ChatEngine, SamplingParams
from backend.protocol.schemas import ToolCall

#: How many times at most the next call of a chain is made, each held to the tools not yet
#: tried (``next_in_chain_call``): each try is one more constrained call at that step (a few
#: seconds on 2 cores), so an agent offering many tools is not held at one step for long.
NEXT_CALL_TRIES = 3


def call_after_made_up(
    engine: ChatEngine,
    prompt: AnswerOrCall,
    unfounded: list[UnfoundedCall],
    params: SamplingParams,
    stop: Sequence[str],
    should_stop: Callable[[], bool],
    logprobs: DescribeToken | None,
) -> list[OutputEvent] | None:
    """The call made again after a reply whose every call made up an argument: the model is
    shown those calls failing, as a tool would answer them, and calls once more, held to the
    tools that give the made-up values where each has one (``tools_giving_every``). None
    when no call is kept.

    A number made up again is kept only where the reply keeps nothing else: the model
    insists, and the number may be written in words ``stated_numbers`` does not read. Beside
    a call it could make, such as the lookup it was told of, the number waits for that
    call's result."""
    if prompt.continued is None:
        return None
    retry = prompt.continued(unfounded_exchange(unfounded, prompt.tools)).call
    if giving := tools_giving_every(unfounded, prompt.tools):
        constraint = call_constraint(giving, retry.parallel_calls)
        retry = dataclasses.replace(retry, constraint=constraint)
    retried = list(Reading(engine, retry, stop, should_stop, logprobs).events(params))
    held, _ = review(retried, prompt)
    if held is None:
        held, _ = review(retried, prompt, numbers=False)
    return held


def next_in_chain_call(
    engine: ChatEngine,
    prompt: AnswerOrCall,
    step: LastStep,
    params: SamplingParams,
    stop: Sequence[str],
    should_stop: Callable[[], bool],
    logprobs: DescribeToken | None,
) -> list[OutputEvent] | None:
    """The call made again after a reply that only repeated answered calls, held to the
    tools the last step did not call, with the calls that take no value the step found
    dropped (``backend.chat.next_in_chain``), then reviewed as the first was; where none is
    left, made again held to the tools not yet tried, ``NEXT_CALL_TRIES`` times in all.
    None when no call is left. From the call's own prompt, already evaluated; the repeat is
    no draft."""
    call, tried = prompt.call, set[str]()
    for _ in range(NEXT_CALL_TRIES):
        others = [t for t in step.other_tools(prompt.tools) if t.function.name not in tried]
        if not others:
            return None
        constraint = call_constraint(others, call.parallel_calls)
        to_others = dataclasses.replace(call, constraint=constraint)
        params = dataclasses.replace(after_answer_prompt(params, prompt, to_others), draft=())
        events = list(Reading(engine, to_others, stop, should_stop, logprobs).events(params))
        calls = calls_in(events)
        building = with_calls(events, [c for c in calls if step.takes_found_value(c)])
        held = building and review(building, prompt)[0]
        if held:
            return held
        if not calls:  # nothing newly tried: the next try would be the same
            return None
        tried |= {c.function.name for c in calls}
    return None


def corrected_call(
    engine: ChatEngine,
    prompt: AnswerOrCall,
    events: list[OutputEvent],
    params: SamplingParams,
    stop: Sequence[str],
    should_stop: Callable[[], bool],
    logprobs: DescribeToken | None,
) -> list[OutputEvent] | None:
    """The calls of ``events`` that repeat answered ones, shown failing and made again,
    held to their tools, keeping the calls that respell one (``corrected_calls.corrections``);
    None when none is. The repeat is the draft."""
    repeats = repeated_calls(calls_in(events), prompt.answered)
    if not repeats or prompt.continued is None:
        return None
    retry = prompt.continued(correction_exchange(repeats, prompt.answered)).call
    names = {call.function.name for call in repeats}
    repeated_tools = [tool for tool in prompt.tools if tool.function.name in names]
    constraint = call_constraint(repeated_tools, retry.parallel_calls)
    retry = dataclasses.replace(retry, constraint=constraint)
    params = dataclasses.replace(params, draft=prompt.repeat)
    retried = list(Reading(engine, retry, stop, should_stop, logprobs).events(params))
    return with_calls(retried, corrections(calls_in(retried), repeats, prompt.answered))


def calls_in(events: Sequence[OutputEvent]) -> list[ToolCall]:
    return next((e.calls for e in events if isinstance(e, ToolCallsFound)), [])


def with_calls(events: list[OutputEvent], calls: list[ToolCall]) -> list[OutputEvent] | None:
    """``events`` with ``calls`` for the calls they found; None where ``calls`` is empty."""
    if not calls:
        return None
    return [
        ToolCallsFound(calls, e.logprobs) if isinstance(e, ToolCallsFound) else e for e in events
    ]


def after_answer_prompt(
    params: SamplingParams, prompt: AnswerOrCall, call: Generation
) -> SamplingParams:
    """``params`` for the call, whose prompt is the answer's and the call's opening: the
    answer's prompt, just evaluated and cached, is evaluated apart so that it is reused whole
    and only the opening is evaluated (about a second a call on 2 cores, benchmarks/README.md,
    "The step after a tool result"). After tool results, the call that repeats the last
    reply's is its draft: the small models open that call again more often than not, and
    checked in one evaluation it is found out in a fraction of its decode steps (dropped by
    ``review`` as before)."""
    params = dataclasses.replace(params, draft=prompt.repeat)
    answer = prompt.answer.ids
    if call.ids[: len(answer)] != answer:
        return params
    return dataclasses.replace(params, evaluated_apart=len(answer))


def review(
    events: list[OutputEvent], prompt: AnswerOrCall, numbers: bool = True
) -> tuple[list[OutputEvent] | None, list[UnfoundedCall]]:
    """``events`` with the calls not worth making taken out: repeats of answered calls or of
    the reply's own (``repeated_calls``), calls with made-up arguments
    (``made_up_arguments``; returned too; made-up numbers only with ``numbers``), and calls
    that give a code to a tool beside a lookup of that code (``lookup_beside``). None when
    calls were found and none is left."""
    found = calls_in(events)
    if not found:
        return events, []
    unfounded, kept, seen = [], [], set(prompt.answered)
    for call in found:
        function = respaced_arguments(call.function, prompt.said)
        function = without_unstated_options(function, prompt.tools, prompt.said)
        call = call.model_copy(update={"function": function})
        key = call_key(call.function.name, call.function.arguments)
        values = unfounded_arguments(
            call.function, prompt.tools, prompt.said, numbers, prompt.after_results
        )
        if values:
            unfounded.append(UnfoundedCall(call, values))
        elif key not in seen:
            kept.append(call)
        seen.add(key)
    waiting = waiting_for_lookup(kept)
    kept = [call for call, waits in zip(kept, waiting, strict=True) if not waits]
    return with_calls(events, kept), unfounded
