"""Turning output events into the spec's completion object or its stream of chunks.

Chat and the groundedness check both answer with a ``PreparedAnswer``: a validated request
whose events are produced on demand. A non-streamed response folds every event of the stream
into one message, so both paths carry the same content by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from backend.chat.output import Finished, Logprobs, OutputEvent, TextDelta, ToolCallsFound
from backend.protocol.groundedness_report import ChatCompletionWithReport, GroundednessReport
from backend.protocol.schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    ChoiceLogprobs,
    ChunkChoice,
    Delta,
    FunctionCallDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    new_completion_id,
    now,
)


@dataclass(frozen=True)
class PreparedAnswer:
    """A validated request, ready to run: everything but the model work."""

    #: The versioned model name the response reports.
    model: str
    prompt_tokens: int
    include_usage: bool
    #: Runs the model and yields the output events; polls its argument (stop asked?) between
    #: tokens, and frees the model when closed early.
    run: Callable[[Callable[[], bool]], Iterator[OutputEvent]]
    #: Whether the request asked for logprobs (``choices[].logprobs`` is null otherwise).
    logprobs: bool = False
    #: A groundedness check's report, where the request asked for it (``core_report``): the
    #: completion carries it as a member of its own (``ChatCompletionWithReport``).
    report: GroundednessReport | None = None


def complete(prepared: PreparedAnswer) -> ChatCompletion:
    """Run ``prepared`` to the end: the non-streamed response."""
    completion = fold_completion(
        prepared.run(lambda: False),
        completion_id=new_completion_id(),
        created=now(),
        model=prepared.model,
        prompt_tokens=prepared.prompt_tokens,
        logprobs=prepared.logprobs,
    )
    if prepared.report is None:
        return completion
    return ChatCompletionWithReport.model_validate(
        {**dict(completion), "core_report": prepared.report}
    )


def stream(
    prepared: PreparedAnswer, should_stop: Callable[[], bool] = lambda: False
) -> Iterator[ChatCompletionChunk]:
    """Run ``prepared`` as a stream of chunks; ``should_stop`` ends generation early."""
    return stream_chunks(
        prepared.run(should_stop),
        completion_id=new_completion_id(),
        created=now(),
        model=prepared.model,
        prompt_tokens=prepared.prompt_tokens,
        include_usage=prepared.include_usage,
        logprobs=prepared.logprobs,
    )


def _usage(prompt_tokens: int, finished: Finished) -> Usage:
    if finished.prompt_tokens is not None:
        prompt_tokens = finished.prompt_tokens
    completion_tokens = finished.completion_tokens
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )


def fold_completion(
    events: Iterable[OutputEvent],
    *,
    completion_id: str,
    created: int,
    model: str,
    prompt_tokens: int,
    logprobs: bool = False,
) -> ChatCompletion:
    """The non-streamed response: every event of the stream, folded into one message
    (with ``logprobs``, every event's entries in order)."""
    text: list[str] = []
    calls: list[ToolCall] = []
    entries = []
    finished = Finished("stop", 0)
    for event in events:
        entries.extend(event.logprobs)
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ToolCallsFound):
            calls.extend(event.calls)
        else:
            finished = event
    message = AssistantMessage(
        content=None if calls and not text else "".join(text), tool_calls=calls or None
    )
    return ChatCompletion(
        id=completion_id,
        created=created,
        model=model,
        choices=[
            Choice(
                message=message,
                logprobs=ChoiceLogprobs(content=entries) if logprobs else None,
                finish_reason=finished.reason,
            )
        ],
        usage=_usage(prompt_tokens, finished),
    )


def _tool_call_deltas(calls: list[ToolCall]) -> Iterator[Delta]:
    # OpenAI's shape: the first fragment of each call carries id, type and name; the
    # arguments follow in fragments identified by ``index`` alone.
    for index, call in enumerate(calls):
        yield Delta(
            tool_calls=[
                ToolCallDelta(
                    index=index,
                    id=call.id,
                    type="function",
                    function=FunctionCallDelta(name=call.function.name, arguments=""),
                )
            ]
        )
        yield Delta(
            tool_calls=[
                ToolCallDelta(
                    index=index, function=FunctionCallDelta(arguments=call.function.arguments)
                )
            ]
        )


def stream_chunks(
    events: Iterable[OutputEvent],
    *,
    completion_id: str,
    created: int,
    model: str,
    prompt_tokens: int,
    include_usage: bool,
    logprobs: bool = False,
) -> Iterator[ChatCompletionChunk]:
    """The streamed response: a role chunk, one chunk per delta, a finish chunk, and the
    usage chunk (empty ``choices``) when asked for. All share one ``id`` and ``created``.

    With ``logprobs``, a chunk with output carries the entries of the tokens behind it (a
    tool call's on its first chunk), and the finish chunk those of tokens that added no text;
    other chunks have ``logprobs: null``.
    """

    def chunk(
        delta: Delta, finish: Finished | None = None, entries: Logprobs | None = None
    ) -> ChatCompletionChunk:
        choice = ChunkChoice(
            delta=delta,
            logprobs=ChoiceLogprobs(content=list(entries)) if entries is not None else None,
            finish_reason=finish.reason if finish else None,
        )
        return ChatCompletionChunk(id=completion_id, created=created, model=model, choices=[choice])

    yield chunk(Delta(role="assistant", content=""))
    for event in events:
        if isinstance(event, TextDelta):
            yield chunk(Delta(content=event.text), entries=event.logprobs if logprobs else None)
        elif isinstance(event, ToolCallsFound):
            for index, delta in enumerate(_tool_call_deltas(event.calls)):
                entries = (event.logprobs if index == 0 else ()) if logprobs else None
                yield chunk(delta, entries=entries)
        else:
            yield chunk(Delta(), event, entries=event.logprobs or None)
            if include_usage:
                yield ChatCompletionChunk(
                    id=completion_id,
                    created=created,
                    model=model,
                    choices=[],
                    usage=_usage(prompt_tokens, event),
                )
