"""Generating an answer and reading it into output events, switching to a constrained tool
call when one begins.

A ``Generation`` runs once and its tokens go through an ``OutputProcessor``
(``backend.chat.reading``). With
``AnswerOrCall`` (``tool_choice`` ``auto`` where calls are constrained) the model decides
whether to call a tool: the answer is generated freely (greedily at any temperature until
its first tokens show which it is, ``backend.chat.tool_calls.opens_tool_call``, so that
calling is the model's most likely choice, not a draw; after tool results, where the profile
sets a share, the first token opens a call whenever the model gives calling that share,
``backend.chat.call_after_results``, unless a learned reading of the model's state finds
otherwise, ``backend.chat.chain_state``); if they open a call,
that free start is dropped and the call is generated again from its opening (its fence or
tag, laid out as it began, ``backend.chat.call_form``), under the constraint that makes it
match a tool's schema. A plain answer continues as it started,
unconstrained and unslowed; one in a ``response_format`` is generated again from the start
under the format's constraint. Where the profile sets a threshold, calls the model itself
finds unneeded for the message are dropped and the message answered without tools
(``backend.chat.tool_need``).

A generated call is then reviewed, and where no call is kept the model calls again in an
exchange the client never sees (``backend.chat.call_review``: repeats, made-up arguments,
calls waiting for a lookup beside them, respellings a tool's error asks for, the next call
of a chain). When no call is left, or the model ends its turn at once (an empty answer) or
starts writing a tool's result itself, the ``plain`` generation answers without tools.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Sequence

from backend.chat.call_after_results import call_after_results
from backend.chat.call_form import call_form, call_in_form
from backend.chat.call_review import (
    after_answer_prompt,
    call_after_made_up,
    corrected_call,
    next_in_chain_call,
    review,
)
from backend.chat.chain_state import read_chain_state
from backend.chat.output import OutputEvent, ToolCallsFound
from backend.chat.prompt import AnswerOrCall, Generation, RenderedPrompt
from backend.chat.reading import DescribeToken, Reading
from backend.chat.tool_calls import TOOL_RESPONSE_OPEN, opens_tool_call
from backend.chat.tool_need import ToolNeedThresholds, calls_are_wanted
from backend.engines.base import ChatEngine, SamplingParams
from backend.groundedness.learned import LearnedReading

#: Tokens read at most before deciding that an answer is not a call (a fence and ``{"name"``
#: take about six). Until the decision they are chosen greedily at any temperature: a
#: sampled lead-in ("Here is the JSON:") or fence ("```xml") would turn the model's call into
#: prose, a draw that once failed a fresh-clone run of the suite (benchmarks/README.md).
OPENING_TOKENS = 16


def answer_events(
    engine: ChatEngine,
    prompt: RenderedPrompt,
    params: SamplingParams,
    stop: Sequence[str],
    should_stop: Callable[[], bool],
    tool_need_below: ToolNeedThresholds | None = None,
    logprobs: DescribeToken | None = None,
    call_after_results_from: float | None = None,
    chain_state: LearnedReading | None = None,
) -> Iterator[OutputEvent]:
    """The output events of the answer to ``prompt``.

    Args:
        stop: stop sequences; the text ends before the first one.
        should_stop: polled between tokens (a client that went away).
        tool_need_below: with ``AnswerOrCall``, a generated call is kept only if the model
            finds the tool needed with at least the probability these thresholds set; None
            keeps every call.
        logprobs: with logprobs asked (``params.top_logprobs`` set), what turns each token
            into its entry; the events then carry them (``backend.chat.output``).
        call_after_results_from: with ``AnswerOrCall`` after tool results, the model calls
            whenever it gives a call's opening at least this share of its probability
            (``backend.chat.call_after_results``); None: its likeliest first token decides.
        chain_state: with ``call_after_results_from``, the learned reading of whether the
            chain needs another call, which overrules the share where they disagree
            (``backend.chat.chain_state``; the engine must expose hidden states).
    """
    if isinstance(prompt, Generation):
        yield from Reading(engine, prompt, stop, should_stop, logprobs).events(params)
        return
    yield from _answer_or_call(
        engine,
        prompt,
        params,
        stop,
        should_stop,
        tool_need_below,
        logprobs,
        call_after_results_from,
        chain_state,
    )


def _answer_or_call(
    engine: ChatEngine,
    prompt: AnswerOrCall,
    params: SamplingParams,
    stop: Sequence[str],
    should_stop: Callable[[], bool],
    tool_need_below: ToolNeedThresholds | None,
    logprobs: DescribeToken | None,
    call_after_results_from: float | None,
    chain_state: LearnedReading | None,
) -> Iterator[OutputEvent]:
    answer = Reading(engine, prompt.answer, stop, should_stop, logprobs)
    json_answers = prompt.answer.constraint is not None

    def call_opened(tokens: Sequence[int]) -> bool | None:
        text = engine.tokenizer.decode(tokens, skip_special_tokens=False)  # type: ignore[attr-defined]
        return opens_tool_call(text, json_answers=json_answers)

    # Whether to call is decided on the model's most likely opening, not drawn at the
    # request's temperature; what follows the decision is sampled as asked.
    deciding = dataclasses.replace(
        params,
        greedy_opening=OPENING_TOKENS,
        opening_decided=lambda tokens: call_opened(tokens) is not None,
    )
    call_needed = False
    if prompt.after_results and call_after_results_from is not None and not json_answers:
        share, call_needed = _share_after_results(
            engine, prompt, call_after_results_from, chain_state
        )
        if share is None:  # done, though the model would open a call (most often a repeat)
            yield from _without_tools(engine, prompt, params, stop, should_stop, logprobs)
            return
        rule = call_after_results(engine.tokenizer, share)
        deciding = dataclasses.replace(deciding, first_token=rule)
    free = engine.generate(prompt.answer.ids, deciding, answer.should_stop)
    try:
        opening: list[int] = []
        is_call = None
        for token in free:
            opening.append(token)
            is_call = call_opened(opening)
            if is_call is not None or len(opening) >= OPENING_TOKENS:
                break
        says_nothing = _no_answer(engine, opening)
        if says_nothing:
            is_call = False  # answered without tools below
        elif not is_call and not json_answers:
            yield from answer.read(itertools.chain(opening, free))
            return
    finally:
        free.close()
    if says_nothing:
        yield from _without_tools(engine, prompt, params, stop, should_stop, logprobs)
        return
    if not is_call:  # an answer in a response_format: generated again, held to the format
        yield from answer.events(params)
        return
    check = prompt.tool_need if tool_need_below is not None else None
    opened = _call_as_opened(engine, prompt, opening)
    call = Reading(engine, opened, stop, should_stop, logprobs).events(
        after_answer_prompt(params, prompt, opened)
    )
    # The call is read whole before it is checked (calls go out at the end anyway).
    events = list(call)
    names = [c.function.name for e in events if isinstance(e, ToolCallsFound) for c in e.calls]
    wanted = not (check and names) or calls_are_wanted(engine, check, names, tool_need_below)
    held, unfounded = review(events, prompt) if wanted else (None, [])
    if held is None and call_needed and not unfounded:
        # Every call repeated an answered one where the chain needs another: the model is
        # shown them failing and writes them again, kept where it corrects their spelling;
        # else it calls once more, held to the tools the last step did not call.
        held = corrected_call(engine, prompt, events, params, stop, should_stop, logprobs)
        if held is None and prompt.last_step is not None:
            step = prompt.last_step
            held = next_in_chain_call(engine, prompt, step, params, stop, should_stop, logprobs)
    if held is None and unfounded:
        # Every call made up an argument: the model is shown those calls failing, as a tool
        # would answer them, and calls once more. (Let free to answer instead, it wrote
        # advice on which tool to call: benchmarks/README.md, "Agents that chain tools".)
        held = call_after_made_up(engine, prompt, unfounded, params, stop, should_stop, logprobs)
    if held is None:
        yield from _without_tools(engine, prompt, params, stop, should_stop, logprobs)
        return
    yield from held


def _without_tools(
    engine: ChatEngine,
    prompt: AnswerOrCall,
    params: SamplingParams,
    stop: Sequence[str],
    should_stop: Callable[[], bool],
    logprobs: DescribeToken | None,
) -> Iterator[OutputEvent]:
    """The ``plain`` answer, without tools. No later request continues its prompt (the next
    one offers the tools again), so it is evaluated in whole chunks, not cut before each
    message for reuse; and it restates the question (after results, the results too), so its
    drafts are looked up in its prompt (``SamplingParams.draft_from_prompt``): the step where
    the model answers at once, benchmarks/README.md."""
    params = dataclasses.replace(params, draft_from_prompt=True, continued_later=False)
    yield from Reading(engine, prompt.plain, stop, should_stop, logprobs).events(params)


def _share_after_results(
    engine: ChatEngine,
    prompt: AnswerOrCall,
    share: float,
    chain_state: LearnedReading | None,
) -> tuple[float | None, bool]:
    """After tool results: the share of its probability from which the model opens a call
    (None: it answers from the results without tools at once), and whether the chain-state
    reading found another call needed. The reading overrules ``share`` where they disagree
    (``backend.chat.chain_state``)."""
    if chain_state is None:
        return share, False
    state = read_chain_state(engine, prompt.answer.ids, chain_state)
    if state.call_needed:
        return 0.0, True
    return (None if state.share >= share else share), False


def _call_as_opened(engine: ChatEngine, prompt: AnswerOrCall, opening: Sequence[int]) -> Generation:
    """The call the free ``opening`` began, in the form it began it (``backend.chat.call_form``)
    where the conversation ends with the user's message. After tool results the call's prompt
    stays the tag's: there the opening is the one the first-token rule favoured, not the
    model's own, and the repeat's draft is written in the tag's form."""
    text = engine.tokenizer.decode(opening, skip_special_tokens=False)  # type: ignore[attr-defined]
    form = call_form(text)
    if prompt.after_results or form is None:
        return prompt.call
    return call_in_form(engine.tokenizer, prompt.answer.ids, prompt.call, form)


def _no_answer(engine: ChatEngine, opening: Sequence[int]) -> bool:
    """Whether an answer that opens with ``opening`` says nothing: the turn ended before
    anything but whitespace was written, or the model began writing a tool's result itself
    (``<tool_response>``, seen after results rendered in the template's form)."""
    decode = engine.tokenizer.decode  # type: ignore[attr-defined]
    ended = next((i for i, token in enumerate(opening) if token in engine.eos_token_ids), None)
    if ended is not None and not decode(opening[:ended], skip_special_tokens=False).strip():
        return True
    text = decode(opening, skip_special_tokens=False).lstrip()
    # The opening stops where the call is ruled out, which can be inside the tag ("<tool_r").
    tag = TOOL_RESPONSE_OPEN
    return len(text) > len("<tool_") and (text.startswith(tag) or tag.startswith(text))
