"""Chat completions answered by an OpenAI-compatible engine, through the service's own rules.

A request is validated here with the in-process messages and statuses, its catalogue name is
mapped to the engine's model id, and tools, ``tool_choice``, stop sequences and sampling go
through to the engine. What comes back goes through the same output path as a local model's
tokens (``backend.chat.output.OutputProcessor``, text in place of token ids): stop sequences,
and tool calls the engine wrote as text (``<tool_call>{...}``, a fenced JSON block: an engine
started without a tool parser) parsed by the project's own parser. Calls the engine parsed
itself are kept as it sent them: all of them, or with ``parallel_tool_calls: false`` (sent on
to the engine) or a forced function the first (``backend.chat.tool_calls.allowed_calls``), as
for calls read from text. Whole or streamed, the events become the spec's completion or its
chunks (``backend.chat.responses``), with this service's id and ``created`` on every chunk
and the catalogue's versioned model name. ``logprobs`` and ``top_logprobs`` go to the engine,
and the entries it returns go out with the text it sent them with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from backend.backends.remote_engine.api import EngineAPI
from backend.backends.remote_engine.wire import EngineChoice, EngineCompletion, EngineToolCall
from backend.chat.output import Finished, OutputEvent, OutputProcessor, ToolCallsFound
from backend.chat.response_format import format_constraint
from backend.chat.responses import PreparedAnswer
from backend.chat.service import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from backend.chat.tool_calls import allowed_calls, several_calls_allowed
from backend.protocol.catalogue import ModelCard
from backend.protocol.schemas import (
    ChatCompletionRequest,
    FunctionCall,
    TokenLogprob,
    ToolCall,
    new_tool_call_id,
)
from backend.protocol.validation import check_chat_request


def callable_tools(request: ChatCompletionRequest) -> frozenset[str]:
    """The tools a reply may call: none with ``tool_choice: none``, the named one when a
    function is forced, else all."""
    if not request.tools or request.tool_choice == "none":
        return frozenset()
    choice = request.tool_choice
    if choice is not None and not isinstance(choice, str):
        return frozenset({choice.function.name})
    return frozenset(tool.function.name for tool in request.tools)


def engine_body(request: ChatCompletionRequest, model: str) -> dict[str, Any]:
    """The engine's request: the same fields under its model id, the spec's sampling defaults
    spelled out (engines have their own)."""
    fields = request.model_dump(
        mode="json",
        exclude_none=True,
        include={
            "messages",
            "tools",
            "tool_choice",
            "stop",
            "seed",
            "n",
            "response_format",
            "logprobs",
            "top_logprobs",
            "parallel_tool_calls",
        },
    )
    body: dict[str, Any] = {
        **fields,
        "model": model,
        "temperature": DEFAULT_TEMPERATURE if request.temperature is None else request.temperature,
        "top_p": DEFAULT_TOP_P if request.top_p is None else request.top_p,
    }
    if request.token_limit is not None:
        body["max_tokens"] = request.token_limit
    return body


class _ToolCallAssembler:
    """Tool calls the engine parsed itself, whole or in streamed fragments keyed by index."""

    def __init__(self) -> None:
        self._parts: dict[int, dict[str, str]] = {}

    def add(self, calls: Iterable[EngineToolCall]) -> None:
        for position, call in enumerate(calls):
            part = self._parts.setdefault(
                call.index if call.index is not None else position,
                {"id": "", "name": "", "arguments": ""},
            )
            part["id"] = part["id"] or (call.id or "")
            if call.function is not None:
                part["name"] += call.function.name or ""
                part["arguments"] += call.function.arguments or ""

    def calls(self) -> list[ToolCall]:
        return [
            ToolCall(
                id=part["id"] or new_tool_call_id(),
                function=FunctionCall(name=part["name"], arguments=part["arguments"] or "{}"),
            )
            for _, part in sorted(self._parts.items())
        ]


def _events(
    pieces: Iterable[EngineCompletion],
    request: ChatCompletionRequest,
    should_stop: Callable[[], bool],
) -> Iterator[OutputEvent]:
    """Events of an engine's answer, whole (one piece) or streamed (one piece per chunk)."""
    parallel = several_calls_allowed(request.parallel_calls, request.tool_choice)
    processor = OutputProcessor(
        None,
        frozenset(),
        stop=request.stop or (),
        tool_names=callable_tools(request),
        parallel_calls=parallel,
    )
    engine_calls = _ToolCallAssembler()
    reason, usage = None, None
    for piece in pieces:
        usage = piece.usage or usage
        choice: EngineChoice | None = piece.choices[0] if piece.choices else None
        if choice is None:
            continue
        message = choice.message or choice.delta
        entries = [
            TokenLogprob.model_validate(entry.model_dump())
            for entry in (choice.logprobs.content or () if choice.logprobs else ())
        ]
        if message is not None and (message.content or message.tool_calls or entries):
            engine_calls.add(message.tool_calls or ())
            yield from processor.feed_text(message.content or "", entries)
        reason = choice.finish_reason or reason
        if processor.stopped or should_stop():
            break
    events = processor.finish()
    calls = allowed_calls(engine_calls.calls(), parallel)
    if calls:
        yield ToolCallsFound(calls)
    for event in events:
        if isinstance(event, Finished):
            completion_tokens = usage.completion_tokens if usage else processor.completion_tokens
            stopped = processor.stopped or reason not in (None, "length")
            yield Finished(
                "stop" if stopped else "length",
                completion_tokens,
                prompt_tokens=usage.prompt_tokens if usage else None,
                logprobs=event.logprobs,
            )
        elif not (calls and isinstance(event, ToolCallsFound)):
            yield event


class EngineChatService:
    """Answers chat requests with the engine's chat model."""

    def __init__(self, api: EngineAPI, model: Callable[[], str]) -> None:
        self.api = api
        #: The engine's model id (asked of the engine on first use when not configured).
        self._model = model

    def prepare(
        self, request: ChatCompletionRequest, card: ModelCard, streamed: bool
    ) -> PreparedAnswer:
        """Check ``request`` now (errors raise here); the engine answers when it is read,
        streaming when the answer is ``streamed`` (so a client going away stops it).

        The usage is the engine's. A stream's is asked for with ``stream_options``; an engine
        that ignores it (llama-cpp-python's server) leaves the streamed prompt count at 0 and
        the completion count at the chunks that carried output.

        Raises:
            BadRequestError: the request breaks a rule of spec 2.2 / 4.1.
        """
        check_chat_request(request)
        format_constraint(request.response_format)  # what the engine could not enforce: a 400
        body = engine_body(request, self._model())
        if streamed:
            body["stream_options"] = {"include_usage": True}

        def run(should_stop: Callable[[], bool]) -> Iterator[OutputEvent]:
            if streamed:
                chunks = self.api.stream_chat(body)
                try:
                    yield from _events(chunks, request, should_stop)
                finally:
                    chunks.close()  # type: ignore[attr-defined]
            else:
                yield from _events([self.api.chat(body)], request, should_stop)

        return PreparedAnswer(
            model=card.version,
            prompt_tokens=0,  # the engine's count arrives with its answer (``Finished``)
            include_usage=request.include_usage,
            run=run,
            logprobs=bool(request.logprobs),
        )
