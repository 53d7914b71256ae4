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
from pydantic import SecretStr

from backend import Backend
from backend.schemas import ChatCompletion
from llamaindex_core_ext.connection import env_api_key, env_base_url, open_backend

GROUNDEDNESS_MODEL = "core-1-mini-groundedness-check"
#: Score of each verdict the service answers with (spec 4.2).
VERDICT_SCORES = {"grounded": 1.0, "notGrounded": 0.0, "notSure": 0.5}


def groundedness_request(
    model: str, response: str | None, contexts: Sequence[str] | None, separator: str
) -> dict[str, Any]:
    """The check's request: the contexts as the user message, the answer as the assistant's.

    Raises:
        ValueError: no response or no non-empty context to check it against.
    """
    if not response:
        raise ValueError("a groundedness check needs a non-empty response")
    context = separator.join(text for text in contexts or () if text)
    if not context:
        raise ValueError("a groundedness check needs at least one non-empty context")
    return {
        "model": model,
        "messages": [
            {"role": "user", "content": context},
            {"role": "assistant", "content": response},
        ],
    }


def evaluation_result(
    completion: ChatCompletion,
    query: str | None,
    response: str | None,
    contexts: Sequence[str] | None,
) -> EvaluationResult:
    """The verdict as an ``EvaluationResult``; an unknown verdict is an invalid result."""
    verdict = (completion.choices[0].message.content or "").strip() if completion.choices else ""
    score = VERDICT_SCORES.get(verdict)
    return EvaluationResult(
        query=query,
        contexts=list(contexts or ()),
        response=response,
        passing=verdict == "grounded" if score is not None else None,
        score=score,
        feedback=verdict,
        invalid_result=score is None,
        invalid_reason=None if score is not None else f"unexpected verdict {verdict!r}",
    )


class CoreGroundednessEvaluator(BaseEvaluator):
    """Whether a response is grounded in its retrieved contexts, by the service's check.

    Args:
        model: the groundedness model (default ``core-1-mini-groundedness-check``).
        context_separator: what joins several contexts into the one context message.
        timeout / max_retries: for the HTTP client; the only retries there are.
        api_key: bearer key (default ``CORE_API_KEY``).
        base_url: server address (default ``CORE_BASE_URL``); None runs the model in-process,
            shared with the other adapter objects of this process.
        backend: a ready ``Backend`` to use instead.
    """

    def __init__(
        self,
        model: str = GROUNDEDNESS_MODEL,
        *,
        context_separator: str = "\n\n",
        timeout: float = 60.0,
        max_retries: int = 2,
        api_key: str | SecretStr | None = None,
        base_url: str | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.model = model
        self.context_separator = context_separator
        self.timeout = timeout
        self.max_retries = max_retries
        self._api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key or env_api_key()
        self.base_url = base_url or env_base_url()
        self._backend = backend

    def get_backend(self) -> Backend:
        """The backend requests go to, opened on first use."""
        if self._backend is None:
            self._backend = open_backend(
                self.base_url, self._api_key, self.timeout, self.max_retries
            )
        return self._backend

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
        request = groundedness_request(self.model, response, contexts, self.context_separator)
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
        request = groundedness_request(self.model, response, contexts, self.context_separator)
        completion = await self.get_backend().achat(request)
        return evaluation_result(completion, query, response, contexts)
