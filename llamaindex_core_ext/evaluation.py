"""``CoreGroundednessEvaluator``: the service's groundedness check as a LlamaIndex evaluator.

The retrieved contexts are joined into the check's ``user`` message and the answer is its
``assistant`` message (spec 4.2); the verdict becomes the result: ``grounded`` passes with
score 1.0, ``notGrounded`` fails with 0.0, ``notSure`` fails with 0.5.

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
from backend.groundedness.request import CONTEXT_SEPARATOR, groundedness_request, read_verdict
from backend.protocol.catalogue import GROUNDEDNESS_MODEL
from backend.protocol.schemas import ChatCompletion
from llamaindex_core_ext.connection import CoreConnection

#: Score of each verdict the service answers with (spec 4.2).
VERDICT_SCORES = {"grounded": 1.0, "notGrounded": 0.0, "notSure": 0.5}


def checked_request(
    model: str, response: str | None, contexts: Sequence[str] | None, separator: str
) -> dict[str, Any]:
    """The check's request for a response and its retrieved contexts.

    Raises:
        ValueError: no response or no non-empty context to check it against.
    """
    if not response:
        raise ValueError("a groundedness check needs a non-empty response")
    texts = [text for text in contexts or () if text]
    if not texts:
        raise ValueError("a groundedness check needs at least one non-empty context")
    return groundedness_request(texts, response, model=model, separator=separator)


def evaluation_result(
    completion: ChatCompletion,
    query: str | None,
    response: str | None,
    contexts: Sequence[str] | None,
) -> EvaluationResult:
    """The verdict as an ``EvaluationResult``; an unknown verdict is an invalid result."""
    try:
        verdict: str | None = read_verdict(completion)
    except ValueError as exc:
        verdict, problem = None, str(exc)
    return EvaluationResult(
        query=query,
        contexts=list(contexts or ()),
        response=response,
        passing=verdict == "grounded" if verdict is not None else None,
        score=VERDICT_SCORES[verdict] if verdict is not None else None,
        feedback=verdict,
        invalid_result=verdict is None,
        invalid_reason=problem if verdict is None else None,
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
        request = checked_request(self.model, response, contexts, self.context_separator)
        completion = self.get_backend().chat(request)
        return evaluation_result(completion, query, response, contexts)

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
        request = checked_request(self.model, response, contexts, self.context_separator)
        completion = await self.get_backend().achat(request)
        return evaluation_result(completion, query, response, contexts)
