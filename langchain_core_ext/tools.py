"""``CoreGroundednessCheck``: the groundedness check (spec 4.2) as a LangChain tool."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.documents import Document
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from backend.schemas import ChatCompletion
from langchain_core_ext.connection import CoreConnection

DEFAULT_GROUNDEDNESS_MODEL = "core-1-mini-groundedness-check"

Verdict = Literal["grounded", "notGrounded", "notSure"]


class GroundednessCheckInput(BaseModel):
    """Arguments of the groundedness check."""

    context: str | list[Document] = Field(
        description="The text the answer should rest on, or retrieved documents."
    )
    answer: str = Field(description="The answer to check against the context.")


def context_text(context: str | list[Document]) -> str:
    """The context as one text: documents' contents joined with blank lines."""
    if isinstance(context, str):
        return context
    return "\n\n".join(doc.page_content for doc in context)


class CoreGroundednessCheck(CoreConnection, BaseTool):
    """Checks whether an answer is grounded in a context.

    Returns ``grounded``, ``notGrounded`` or ``notSure`` (the model cannot tell).

    Example:
        >>> from langchain_core_ext import CoreGroundednessCheck
        >>> check = CoreGroundednessCheck()
        >>> check.invoke({"context": "Paris is in France.", "answer": "Paris is in France."})
        'grounded'
    """

    name: str = "core_groundedness_check"
    description: str = (
        "Checks whether an answer is supported by a context. Input: the context (text or "
        "documents) and the answer. Output: grounded, notGrounded or notSure."
    )
    args_schema: type[BaseModel] = GroundednessCheckInput
    model: str = Field(default=DEFAULT_GROUNDEDNESS_MODEL, description="Groundedness model.")

    def _request(self, context: str | list[Document], answer: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [
                {"role": "user", "content": context_text(context)},
                {"role": "assistant", "content": answer},
            ],
        }

    @staticmethod
    def _verdict(completion: ChatCompletion) -> Verdict:
        return completion.choices[0].message.content  # type: ignore[return-value]

    def _run(
        self,
        context: str | list[Document],
        answer: str,
        run_manager: CallbackManagerForToolRun | None = None,
    ) -> Verdict:
        return self._verdict(self._get_backend().chat(self._request(context, answer)))

    async def _arun(
        self,
        context: str | list[Document],
        answer: str,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
    ) -> Verdict:
        return self._verdict(await self._get_backend().achat(self._request(context, answer)))
