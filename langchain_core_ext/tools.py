"""``CoreGroundednessCheck``: the groundedness check (spec 4.2) as a LangChain tool."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.documents import Document
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from backend.groundedness.request import groundedness_request, read_verdict
from backend.protocol.catalogue import GROUNDEDNESS_MODEL
from backend.protocol.schemas import Verdict
from langchain_core_ext.connection import CoreConnection


class GroundednessCheckInput(BaseModel):
    """Arguments of the groundedness check."""

    context: str | list[Document] = Field(
        description="The text the answer should rest on, or retrieved documents."
    )
    answer: str = Field(description="The answer to check against the context.")


def context_texts(context: str | list[Document]) -> str | list[str]:
    """The context as the check takes it: a text, or the documents' contents."""
    if isinstance(context, str):
        return context
    return [doc.page_content for doc in context]


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
    model: str = Field(default=GROUNDEDNESS_MODEL, description="Groundedness model.")

    def _request(self, context: str | list[Document], answer: str) -> dict[str, Any]:
        return groundedness_request(context_texts(context), answer, model=self.model)

    def _run(
        self,
        context: str | list[Document],
        answer: str,
        run_manager: CallbackManagerForToolRun | None = None,
    ) -> Verdict:
        return read_verdict(self._get_backend().chat(self._request(context, answer)))

    async def _arun(
        self,
        context: str | list[Document],
        answer: str,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
    ) -> Verdict:
        return read_verdict(await self._get_backend().achat(self._request(context, answer)))
