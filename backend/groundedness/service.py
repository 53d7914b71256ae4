"""The groundedness check on local models: a validated request judged and given its verdict.

``JudgeReader`` is the engine that reads the judge's prompts (the chat engine, or a faster
copy of the model for prompt evaluation), with the lock held while it reads and the
calibration key its readings need; the in-process backend chooses it in one place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

from backend.chat.output import Finished, OutputEvent, TextDelta
from backend.chat.responses import PreparedAnswer
from backend.chat.yes_no import YesNoReading
from backend.engines.base import ChatEngine, FactChecker
from backend.groundedness.calibration import JudgeCalibration
from backend.groundedness.judge import Assessment, GroundednessJudge
from backend.groundedness.report import JudgeReport, build_report, report_body
from backend.protocol.catalogue import ModelCard
from backend.protocol.errors import BadRequestError
from backend.protocol.schemas import ChatCompletionRequest, Verdict
from backend.protocol.validation import check_groundedness_messages


@dataclass(frozen=True)
class JudgeReader:
    """The engine that reads the judge's prompts: a local chat engine, a ``YesNoReading``
    of an engine behind an API, or a fact-checker that reads (chunk, claim) pairs itself."""

    engine: ChatEngine | YesNoReading | FactChecker
    #: Held while the engine reads (the chat engine's own turn when it is the chat engine).
    turn: Callable[[], AbstractContextManager] = contextlib.nullcontext
    #: Which model reads: ``chat engine``, ``bf16 copy`` of the chat model
    #: (``CORE_GROUNDEDNESS_ENGINE=transformers``), ``judge model`` (``CORE_JUDGE_MODEL``),
    #: or ``engine`` behind an API.
    source: str = "chat engine"

    def describe(self) -> str:
        """What reads the judge's prompts, in words: ``"llama.cpp (chat engine)"``."""
        return f"{self.kind} ({self.source})"

    @property
    def kind(self) -> str:
        """Which calibration its readings need: ``llama.cpp`` for quantized prompt evaluation,
        ``transformers`` for other local engines (``calibration.CALIBRATIONS``), ``engine``
        behind an API (calibrated for the model it serves, or not at all), ``checker`` for a
        fact-checker (its authors' cut, ``calibration.checker_thresholds``)."""
        if isinstance(self.engine, FactChecker):
            return "checker"
        if isinstance(self.engine, YesNoReading):
            return "engine"
        return "llama.cpp" if self.engine.quantized_prompt_evaluation else "transformers"

    @property
    def reads_hidden_states(self) -> bool:
        """Whether the engine exposes hidden states, as the judge's learned reading needs."""
        return isinstance(self.engine, ChatEngine) and self.engine.reads_hidden_states


class GroundednessService:
    """Answers groundedness checks: the judge reads the support, the calibration decides."""

    def __init__(self, reader: JudgeReader, calibration: JudgeCalibration) -> None:
        self.reader = reader
        self.calibration = calibration
        self.judge = GroundednessJudge(
            reader.engine,
            questions=calibration.questions,
            stop_at=calibration.thresholds,
            learned=calibration.learned,
        )

    def judge_request(self, request: ChatCompletionRequest) -> tuple[Verdict, Assessment]:
        """The verdict on a check request, and the judge's assessment behind it.

        Raises:
            BadRequestError: the messages are not one context and one response (spec 4.2).
        """
        context, response = check_groundedness_messages(request.messages)
        with self.reader.turn():
            assessment = self.judge.assess(context, response)
        return self.calibration.verdict(assessment.support), assessment

    def report_request(self, request: ChatCompletionRequest) -> JudgeReport:
        """The report on a check request (``backend.groundedness.report``): the judge's
        readings of the plain check kept, claim by claim; no further reading.

        Raises:
            BadRequestError: the messages are not one context and one response (spec 4.2).
        """
        context, response = check_groundedness_messages(request.messages)
        with self.reader.turn():
            assessment, readings = self.judge.read(context, response)
        return build_report(context, response, assessment, readings, self.calibration)

    def prepare(self, request: ChatCompletionRequest, card: ModelCard) -> PreparedAnswer:
        """Check and judge ``request`` now: every prompt is read before the answer starts, so
        its usage is known up front (the async paths call this from a worker thread). The
        request's temperature is validated but changes nothing: the judge samples nothing.
        With ``core_report`` (not in the spec) the completion also carries the report
        (``ChatCompletionWithReport``); the answer itself is the same.
        """
        if request.logprobs or request.top_logprobs is not None:
            raise BadRequestError(
                "invalid request: logprobs are not available for the groundedness check, "
                "whose verdict is read from the judge's probabilities, not generated"
            )
        if request.core_report:
            found = self.report_request(request)
            verdict, prompt_tokens = found.verdict, found.prompt_tokens
            report = report_body(found, card.version)
        else:
            report = None
            verdict, assessment = self.judge_request(request)
            prompt_tokens = assessment.prompt_tokens

        def run(should_stop: Callable[[], bool]) -> Iterator[OutputEvent]:
            yield TextDelta(verdict)
            yield Finished("stop", 1)

        return PreparedAnswer(
            model=card.version,
            prompt_tokens=prompt_tokens,
            include_usage=request.include_usage,
            run=run,
            report=report,
        )
