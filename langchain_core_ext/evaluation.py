"""``CoreGroundednessEvaluator``: the groundedness report as a LangSmith evaluator.

It reads a run's answer and the context it rests on, asks the service for the groundedness
report, and answers LangSmith's feedback::

    {"key": "groundedness", "score": 0.0, "value": "notGrounded",
     "comment": 'notGrounded: 1 of 2 claims not supported by the context: "It is blue."
                 (notGrounded, support 0.02)',
     "metadata": {"support": 0.02, "corrected_response": "...", "unsupported_claims": [...]}}

``score`` is the verdict's (``VERDICT_SCORES``): 1 for ``grounded``, 0 for ``notGrounded``,
0.5 for ``notSure``, so an experiment's mean score is the share of grounded answers. The
report's ``support`` (the weakest claim's, compared with the model's thresholds; not a
calibrated probability, and the thresholds differ by model) is in ``metadata``.

>>> evaluator = CoreGroundednessEvaluator(context_key="context", answer_key="answer")
>>> langsmith.evaluate(rag_chain.invoke, data="my-dataset", evaluators=[evaluator])
>>> evaluator.evaluate_groundedness(context, answer)            # the same, without LangSmith
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langsmith.evaluation import EvaluationResult, RunEvaluator
from langsmith.schemas import Example, Run
from pydantic import Field

from backend.groundedness.report_summary import (
    VERDICT_SCORES,
    unsupported_claims,
    unsupported_summary,
)
from backend.protocol.catalogue import GROUNDEDNESS_MODEL
from backend.protocol.groundedness_report import GroundednessReport
from langchain_core_ext.connection import CoreConnection

#: The feedback key of the evaluator's results.
GROUNDEDNESS_KEY = "groundedness"

ContextLike = str | Document | Mapping[str, Any] | Sequence[str | Document | Mapping[str, Any]]


def context_of(value: ContextLike) -> str | list[str]:
    """A run's context as the check takes it: a text, or the texts of retrieved documents
    (``Document``, their dict form with ``page_content``, or strings).

    Raises:
        TypeError: something else.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Document | Mapping):
        return [_text_of(value)]
    if isinstance(value, Sequence):
        return [_text_of(item) for item in value]
    raise TypeError(f"a context is a text or documents, not {type(value).__name__}")


def _text_of(item: str | Document | Mapping[str, Any]) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Document):
        return item.page_content
    if isinstance(item, Mapping) and isinstance(item.get("page_content"), str):
        return item["page_content"]
    raise TypeError(f"a context document is a text or a Document, not {type(item).__name__}")


def groundedness_feedback(report: GroundednessReport, key: str = GROUNDEDNESS_KEY) -> dict:
    """The report as LangSmith feedback (the dict an evaluator function may return): the
    verdict's score, the verdict as ``value``, the unsupported claims as ``comment``, and
    the support, corrected response and unsupported claims' texts in ``metadata``."""
    return {
        "key": key,
        "score": VERDICT_SCORES[report.verdict],
        "value": report.verdict,
        "comment": unsupported_summary(report),
        "metadata": {
            "support": report.support,
            "corrected_response": report.corrected_response,
            "unsupported_claims": [claim.text for claim in unsupported_claims(report)],
        },
    }


class CoreGroundednessEvaluator(CoreConnection, RunEvaluator):
    """Scores whether a run's answer is grounded in its context, by the service's report.

    Args:
        context_key: where the context is: looked up in the run's outputs, then its inputs,
            then the example's inputs and outputs. A text, documents or texts.
        answer_key: the answer in the run's outputs (``"output"`` for a chain that returns a
            string: LangSmith records it as ``{"output": ...}``).
        key: the feedback key.
        model, and the connection settings (``base_url``, ``backend``...): as for the other
            adapters (``langchain_core_ext.connection.CoreConnection``).
    """

    model: str = Field(default=GROUNDEDNESS_MODEL, description="Groundedness model.")
    context_key: str = Field(default="context", description="Where the run's context is.")
    answer_key: str = Field(default="answer", description="The answer in the run's outputs.")
    key: str = Field(default=GROUNDEDNESS_KEY, description="The feedback key.")

    @property
    def feedback_keys(self) -> list[str]:
        return [self.key]

    def evaluate_groundedness(self, context: ContextLike, answer: str) -> dict:
        """The feedback (``groundedness_feedback``) for ``answer`` against ``context``."""
        report = self._get_backend().check_groundedness_report(
            context_of(context), answer, model=self.model
        )
        return groundedness_feedback(report, self.key)

    async def aevaluate_groundedness(self, context: ContextLike, answer: str) -> dict:
        """The async twin of ``evaluate_groundedness``."""
        report = await self._get_backend().acheck_groundedness_report(
            context_of(context), answer, model=self.model
        )
        return groundedness_feedback(report, self.key)

    def evaluate_run(
        self,
        run: Run,
        example: Example | None = None,
        evaluator_run_id: uuid.UUID | None = None,
    ) -> EvaluationResult:
        """LangSmith's entry point: the run's answer checked against its context.

        Raises:
            KeyError: the run has no answer or no context under the keys.
        """
        context, answer = self._inputs(run, example)
        return EvaluationResult(**self.evaluate_groundedness(context, answer))

    async def aevaluate_run(
        self,
        run: Run,
        example: Example | None = None,
        evaluator_run_id: uuid.UUID | None = None,
    ) -> EvaluationResult:
        """The async twin of ``evaluate_run``."""
        context, answer = self._inputs(run, example)
        return EvaluationResult(**await self.aevaluate_groundedness(context, answer))

    def _inputs(self, run: Run, example: Example | None) -> tuple[ContextLike, str]:
        places = [run.outputs or {}, run.inputs or {}]
        if example is not None:
            places += [example.inputs or {}, example.outputs or {}]
        contexts = [place[self.context_key] for place in places if self.context_key in place]
        if not contexts:
            raise KeyError(f"no {self.context_key!r} in the run's outputs or inputs or the example")
        answer = (run.outputs or {}).get(self.answer_key)
        if not isinstance(answer, str):
            raise KeyError(f"no {self.answer_key!r} text in the run's outputs")
        return contexts[0], answer
