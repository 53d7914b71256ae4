"""Chat completions on one chat engine: a request checked, rendered, budgeted and run.

The in-process backend hands a validated request and its catalogue entry to ``prepare``; what
comes back runs the model when read (``backend.chat.responses``), through the one path of
``backend.chat.generation``, streamed or not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from backend.chat.generation import answer_events
from backend.chat.logprobs import TokenLogprobsReader
from backend.chat.output import OutputEvent
from backend.chat.prompt import RenderedPrompt, render_prompt
from backend.chat.response_format import format_constraint
from backend.chat.responses import PreparedAnswer
from backend.chat.tool_need import ToolNeedThresholds
from backend.engines.base import ChatEngine, JSONSchemaConstraint, SamplingParams
from backend.groundedness.learned import LearnedReading
from backend.protocol.catalogue import ModelCard
from backend.protocol.errors import BadRequestError
from backend.protocol.schemas import ChatCompletionRequest
from backend.protocol.validation import check_chat_request, check_context_budget

DEFAULT_TEMPERATURE = 0.7  # spec 4.1
DEFAULT_TOP_P = 1.0


class ChatService:
    """Answers chat requests with ``engine``.

    Args:
        engine: the chat engine.
        turn: held while the engine works for a request (its lock, or nothing for an engine
            that batches concurrent requests itself).
        tool_need_below: see ``backend.chat.tool_need``; None: every generated call is kept.
        call_after_results_from: see ``backend.chat.call_after_results``; None: after tool
            results the model's likeliest first token decides whether it calls again.
        chain_state: see ``backend.chat.chain_state``; None: the share alone decides.
    """

    def __init__(
        self,
        engine: ChatEngine,
        turn: Callable[[], AbstractContextManager],
        tool_need_below: ToolNeedThresholds | None = None,
        call_after_results_from: float | None = None,
        chain_state: LearnedReading | None = None,
    ) -> None:
        self.engine = engine
        self._turn = turn
        self._tool_need_below = tool_need_below
        self._call_after_results_from = call_after_results_from
        self._chain_state = chain_state

    @functools.cached_property
    def _logprobs_reader(self) -> TokenLogprobsReader:
        """Built on the first request with logprobs (it reads the whole vocabulary once)."""
        return TokenLogprobsReader(self.engine.tokenizer)

    def render(self, request: ChatCompletionRequest) -> RenderedPrompt:
        """The request's prompt as the engine will read it (also for a part of a
        conversation that could not be sent alone, such as one a client is trimming)."""
        return render_prompt(
            self.engine.tokenizer,
            request.messages,
            request.tools,
            request.tool_choice,
            constrained=self.engine.supports_constraints,
            answer_format=self._answer_format(request),
            parallel_calls=request.parallel_calls,
        )

    def _answer_format(self, request: ChatCompletionRequest) -> JSONSchemaConstraint | None:
        constraint = format_constraint(request.response_format)
        if constraint is not None and not self.engine.supports_constraints:
            raise BadRequestError(
                "invalid request: response_format needs constrained decoding, which this "
                "chat engine lacks (install xgrammar: the local extra)",
                param="response_format",
            )
        return constraint

    def prepare(self, request: ChatCompletionRequest, card: ModelCard) -> PreparedAnswer:
        """Check and render ``request`` now (errors raise here); run it when read.

        Raises:
            BadRequestError: the request breaks a rule of spec 2.2 / 4.1.
        """
        engine = self.engine
        check_chat_request(request)
        rendered = self.render(request)
        max_new = check_context_budget(
            len(rendered.ids),
            request.token_limit,
            min(card.context_length, engine.context_length),
        )
        params = SamplingParams(
            max_new_tokens=max_new,
            temperature=DEFAULT_TEMPERATURE if request.temperature is None else request.temperature,
            top_p=DEFAULT_TOP_P if request.top_p is None else request.top_p,
            seed=request.seed,
            top_logprobs=(request.top_logprobs or 0) if request.logprobs else None,
        )
        logprobs = self._logprobs_reader if request.logprobs else None

        def run(should_stop: Callable[[], bool]) -> Iterator[OutputEvent]:
            with self._turn():
                yield from answer_events(
                    engine,
                    rendered,
                    params,
                    request.stop or (),
                    should_stop,
                    self._tool_need_below,
                    logprobs,
                    self._call_after_results_from,
                    self._chain_state,
                )

        return PreparedAnswer(
            model=card.version,
            prompt_tokens=len(rendered.ids),
            include_usage=request.include_usage,
            run=run,
            logprobs=bool(request.logprobs),
        )
