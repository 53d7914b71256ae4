"""``CoreGroundednessEvaluator``: the service's groundedness check as a LlamaIndex evaluator.

The retrieved contexts are joined into one context (a blank line between them, as the
check's ``user`` message joins them, spec 4.2) and the answer is checked against it by the
groundedness report (``Backend.check_groundedness_report``: the check's verdict, with each
claim's). The verdict becomes the result: ``grounded`` passes with score 1.0,
``notGrounded`` fails with 0.0, ``notSure`` fails with 0.5; ``feedback`` names the claims the
contexts do not support (``backend.groundedness.report_summary.unsupported_summary``)::

    notGrounded: 1 of 2 claims not supported by the context: "It is blue." (notGrounded,
    support 0.02)

>>> evaluator = CoreGroundednessEvaluator()
>>> result = evaluator.evaluate_response(query=question, response=query_engine.query(question))
>>> result.passing, result.score, result.feedback
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.evaluation.base import BaseEvaluator, EvaluationResult
from llama_index.core.prompts.mixin import PromptDictType

from backend import Backend
from backend.groundedness.report_summary import VERDICT_SCORES, unsupported_summary
from backend.groundedness.request import CONTEXT_SEPARATOR
from backend.protocol.catalogue import GROUNDEDNESS_MODEL
from backend.protocol.groundedness_report import GroundednessReport
from llamaindex_core_ext.connection import CoreConnection

__all__ = ["VERDICT_SCORES", "CoreGroundednessEvaluator", "checked_context", "evaluation_result"]


def checked_context(response: str | None, contexts: Sequence[str] | None, separator: str) -> str:
    """The one context ``response`` is checked against: the non-empty ``contexts`` joined.

    Raises:
        ValueError: no response or no non-empty context to check it against.
    """
    if not response:
        raise ValueError("a groundedness check needs a non-empty response")
    texts = [text for text in contexts or () if text]
    if not texts:
        raise ValueError("a groundedness check needs at least one non-empty context")
    return separator.join(texts)


def evaluation_result(
    report: GroundednessReport,
    query: str | None,
    response: str | None,
    contexts: Sequence[str] | None,
) -> EvaluationResult:
    """The report as an ``EvaluationResult``: passing when grounded, the verdict's score,
    and the unsupported claims as feedback."""
    return EvaluationResult(
        query=query,
        contexts=list(contexts or ()),
        response=response,
        passing=report.verdict == "grounded",
        score=VERDICT_SCORES[report.verdict],
        feedback=unsupported_summary(report),
    )


class CoreGroundednessEvaluator(BaseEvaluator):
    """Whether a response is grounded in its retrieved contexts, by the service's check.

    Args:
        model: the groundedness model (default ``core-1-mini-groundedness-check``).
        context_separator: what joins several contexts into the one context message.
        **connection: ``base_url``, ``api_key``, ``timeout``, ``max_retries``, ``backend``
            and the engine options (``engine_url``, ``chat_model``...), as for the other
            adapters (``llamaindex_core_ext.connection.CoreConnection``).
    """

    def __init__(
        self,
        model: str = GROUNDEDNESS_MODEL,
        *,
        context_separator: str = CONTEXT_SEPARATOR,
        **connection: Any,
    ) -> None:
        self.model = model
        self.context_separator = context_separator
        self.connection = CoreConnection(**connection)

    def get_backend(self) -> Backend:
        """The backend requests go to, opened on first use."""
        return self.connection.get_backend()

    def close(self) -> None:
        """Close the client this evaluator opened, or give up its share of the in-process
        models; a ``backend`` passed in is the caller's."""
        self.connection.close()

    def _get_prompts(self) -> PromptDictType:
        return {}  # the check is a model of its own: no prompt to read or change

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if prompts_dict:
            raise ValueError("the groundedness check takes no prompts")

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """Check ``response`` against ``contexts`` (``query`` is only recorded).

        Synchronous all the way, unlike the base class's, which runs ``aevaluate`` in an event
        loop of its own: an HTTP client's async connections belong to one loop.
        """
        context = checked_context(response, contexts, self.context_separator)
        report = self.get_backend().check_groundedness_report(context, response, model=self.model)
        return evaluation_result(report, query, response, contexts)

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """Check ``response`` against ``contexts`` (``query`` is only recorded).

        Raises:
            ValueError: ``response`` or ``contexts`` is missing or empty.
        """
        context = checked_context(response, contexts, self.context_separator)
        report = await self.get_backend().acheck_groundedness_report(
            context, response, model=self.model
        )
        return evaluation_result(report, query, response, contexts)
