"""What both chat engines' batching runners share: the requests callers hand them, and the one
thread that owns the model and serves them.

A caller submits a request (a generation, or the scoring of the token after a prompt) and reads
its results from the request's queue: generated tokens and then ``END``, or an exception. The
runner's thread waits until there is work and runs the engine's ``_step`` (admit, evaluate,
decode) until it is closed. A caller that stops reading (closes the generator) cancels its
request, which the step drops. How a step batches is each engine's own
(``backend.engines.llamacpp_runner``, ``backend.engines.transformers_runner``).
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import logging
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.engines.base import ChatEngine, JSONSchemaConstraint, SamplingParams

logger = logging.getLogger(__name__)

#: Put in a request's queue after its last token.
END = object()
#: Requests a batching engine decodes together at most (``CORE_CHAT_PARALLEL``); more wait
#: for a place.
DEFAULT_PARALLEL = 8


@dataclass(eq=False)
class RunnerRequest:
    """One generation (``choose`` set) or one scoring of the next token (``score`` set)."""

    prompt: list[int]
    budget: int
    #: Picks the next token from a row of logits (greedy, sampled, masked); generation only.
    choose: Callable[[Any], int] | None
    #: Turns the logits after the prompt into the scoring's result; scoring only.
    score: Callable[[Any], object] | None
    should_stop: Callable[[], bool]
    end_ids: frozenset[int]
    results: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    generated: list[int] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)
    order: int = 0
    #: The prompt's first ``apart`` tokens are evaluated as that prompt alone would be, the
    #: rest after them (``SamplingParams.evaluated_apart``); 0: the prompt as a whole.
    apart: int = 0
    #: Tokens the generation is likely to write first (``SamplingParams.draft``); a runner
    #: that verifies drafts drops it at the first token chosen otherwise.
    draft: tuple[int, ...] = ()
    #: Drafts looked up in the prompt and the tokens so far (``SamplingParams.draft_from_prompt``).
    lookup: bool = False
    #: Whether a later request may continue the prompt (``SamplingParams.continued_later``).
    continued_later: bool = True
    #: The tokens the output's constraint allows alone next, where it constrains one; a
    #: runner that verifies drafts may check them as one (``TokenMask.forced_text``).
    forced: Callable[[], list[int]] | None = None
    #: The forced text is not checked before the request has written this many tokens: after
    #: a check that missed, the model writes the rest of that text in its own tokens (where it
    #: lays out an indent a space a token, the draft's run of spaces misses at every step).
    forced_from: int = 0


def stop_asked(request: RunnerRequest) -> bool:
    """Whether the request's caller wants no more tokens; a callback that raises ends its own
    request only."""
    try:
        return request.should_stop()
    except Exception:  # noqa: BLE001 - a broken callback ends its own request only
        logger.exception("should_stop raised; ending the request")
        return True


class RequestRunner(abc.ABC):
    """A thread serving generations and scorings submitted from any thread.

    Subclasses set up their own state, then call ``_start``; they define ``_step`` (one round
    of work), ``_busy`` (work in flight besides the waiting queue) and ``_fail_everything``.
    """

    #: The request type this runner makes (a ``RunnerRequest`` with the engine's own fields).
    request_type: type[RunnerRequest] = RunnerRequest

    def __init__(self, thread_name: str) -> None:
        self._waiting: deque[RunnerRequest] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._counter = itertools.count(1)
        self._thread = threading.Thread(target=self._loop, name=thread_name, daemon=True)

    def _start(self) -> None:
        self._thread.start()

    # ------------------------------------------------------------------ callers' side

    def generate(
        self,
        prompt: list[int],
        budget: int,
        choose: Callable[[Any], int],
        should_stop: Callable[[], bool],
        end_ids: frozenset[int],
        apart: int = 0,
        draft: Sequence[int] = (),
        lookup: bool = False,
        continued_later: bool = True,
        forced: Callable[[], list[int]] | None = None,
    ) -> Iterator[int]:
        """Yield generated tokens as the runner produces them; closing cancels the request.
        ``apart``: see ``RunnerRequest.apart`` (a runner may evaluate the prompt whole);
        ``draft``, ``lookup``, ``continued_later`` and ``forced``: see ``RunnerRequest`` (a
        runner may ignore them)."""
        request = self.request_type(prompt, budget, choose, None, should_stop, end_ids)
        request.apart = apart if 0 < apart < len(prompt) else 0
        request.draft = tuple(draft)
        request.lookup = lookup
        request.continued_later = continued_later
        request.forced = forced
        self._submit(request)
        try:
            while (item := request.results.get()) is not END:
                if isinstance(item, BaseException):
                    raise item
                yield item  # type: ignore[misc]
        finally:
            request.cancelled.set()
            self._notify()

    def score(self, prompt: list[int], score: Callable[[Any], object]) -> object:
        """``score(logits)`` of the position after the prompt."""
        return self.score_many([prompt], score)[0]

    def score_many(self, prompts: list[list[int]], score: Callable[[Any], object]) -> list:
        """``score(logits)`` of the position after each prompt, in order. They are submitted
        together, so a runner that batches scorings can evaluate them in one pass."""
        requests = [
            self.request_type(prompt, 0, None, score, lambda: False, frozenset())
            for prompt in prompts
        ]
        return self._await_scorings(requests)

    def _await_scorings(self, requests: list[RunnerRequest]) -> list:
        """Submit scoring requests together and wait for each one's result, in order."""
        try:
            self._submit(*requests)
            items = [request.results.get() for request in requests]
        finally:
            for request in requests:
                request.cancelled.set()
        for item in items:
            if isinstance(item, BaseException):
                raise item
        return items

    def close(self) -> None:
        """Stop the thread; requests still in flight fail."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()

    def _submit(self, *requests: RunnerRequest) -> None:
        """Queue the requests, all at once: the runner sees them in the same step."""
        with self._wake:
            if self._closed:
                raise RuntimeError("the chat engine is closed")
            for request in requests:
                request.order = next(self._counter)
                self._waiting.append(request)
            self._wake.notify()

    def _notify(self) -> None:
        with self._wake:
            self._wake.notify()

    # ------------------------------------------------------------------ the runner thread

    def _loop(self) -> None:
        with self._thread_context():
            while True:
                with self._wake:
                    while not self._closed and not self._waiting and not self._busy():
                        self._wake.wait()
                    if self._closed:
                        break
                try:
                    self._step()
                except BaseException as error:  # noqa: BLE001 - a bug here must not hang callers
                    logger.exception("the %s failed; failing its requests", self._thread.name)
                    self._fail_everything(error)
            self._fail_everything(RuntimeError("the chat engine was closed"))

    def _thread_context(self) -> contextlib.AbstractContextManager:
        """Entered once on the runner's thread, around all its work."""
        return contextlib.nullcontext()

    def _take_waiting(self) -> list[RunnerRequest]:
        """Empty the waiting queue, for ``_fail_everything``."""
        with self._wake:
            waiting, self._waiting = list(self._waiting), deque()
        return waiting

    @abc.abstractmethod
    def _busy(self) -> bool:
        """Whether requests are in flight (the thread then keeps stepping)."""

    @abc.abstractmethod
    def _step(self) -> None:
        """One round of work on the requests in flight and waiting."""

    @abc.abstractmethod
    def _fail_everything(self, error: BaseException) -> None:
        """Hand ``error`` to every request in flight or waiting (``_take_waiting``)."""


class RunnerChatEngine(ChatEngine):
    """A chat engine whose requests a ``RequestRunner`` serves: thread-safe, batched.

    Subclasses set ``_runner``, ``context_length`` and ``eos_token_ids``, and say how a
    generation picks its tokens (``_chooser``).
    """

    thread_safe = True
    _runner: RequestRunner

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
        constraint: JSONSchemaConstraint | None = None,
    ) -> Generator[int, None, None]:
        """Yield token ids one at a time; see ``ChatEngine.generate``.

        With ``constraint``, the output is one JSON value valid against its schema, then the
        end of the turn.
        """
        prompt = checked_prompt(prompt_ids)
        budget = min(params.max_new_tokens, self.context_length - len(prompt))
        if budget <= 0 or should_stop():
            return
        choose = self._chooser(params, constraint)
        yield from self._runner.generate(
            prompt,
            budget,
            choose,
            should_stop,
            self.eos_token_ids,
            params.evaluated_apart,
            params.draft,
            params.draft_from_prompt,
            params.continued_later,
            self._forced_tokens(choose),
        )

    @abc.abstractmethod
    def _chooser(
        self, params: SamplingParams, constraint: JSONSchemaConstraint | None
    ) -> Callable[[Any], int]:
        """How one generation picks each token from its row of logits (on the runner's
        thread)."""

    def _forced_tokens(self, choose: Callable[[Any], int]) -> Callable[[], list[int]] | None:
        """What gives the tokens the constraint ``choose`` keeps to allows alone next
        (``RunnerRequest.forced``); None: none, or a runner that checks no drafts."""
        return None


def default_parallel() -> int:
    """``CORE_CHAT_PARALLEL`` when set, else ``DEFAULT_PARALLEL``."""
    return positive_from_env("CORE_CHAT_PARALLEL") or DEFAULT_PARALLEL


def runs_alone(deterministic: bool | None = None) -> bool:
    """Whether an engine runs each request alone, so that none depends on another decoded
    beside it (at the cost of batching; benchmarks/README.md): ``deterministic`` when given,
    else ``CORE_DETERMINISTIC``, off by default."""
    return flag_from_env("CORE_DETERMINISTIC", deterministic)


def flag_from_env(name: str, given: bool | None = None, unset: bool = False) -> bool:
    """``given`` when not None, else the yes or no in environment variable ``name`` (``unset``
    when it is not set).

    Raises:
        ValueError: it is set to anything but a yes or a no (1/0, true/false, yes/no, on/off).
    """
    if given is not None:
        return given
    configured = os.environ.get(name, "").strip().lower()
    if not configured:
        return unset
    if configured in ("0", "false", "no", "off"):
        return False
    if configured in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name} must be 1/true/yes/on or 0/false/no/off, got {configured!r}")


def positive_from_env(name: str) -> int | None:
    """The whole number in environment variable ``name``; None when unset.

    Raises:
        ValueError: it is set to anything but a whole number of at least 1.
    """
    configured = os.environ.get(name)
    if not configured:
        return None
    try:
        value = int(configured)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {configured!r}")
    return value


def checked_prompt(prompt_ids: Sequence[int]) -> list[int]:
    """The prompt as a list of ints; an empty one is refused."""
    if not prompt_ids:
        raise ValueError("the prompt holds no tokens")
    return [int(i) for i in prompt_ids]
