"""``CoreGroundednessCheck``: the groundedness check (spec 4.2) as a LangChain tool."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.documents import Document
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field, model_validator

from backend.groundedness.request import groundedness_request, read_verdict
from backend.protocol.catalogue import GROUNDEDNESS_MODEL
from backend.protocol.groundedness_report import GroundednessReport
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

    Returns ``grounded``, ``notGrounded`` or ``notSure`` (the model cannot tell). With
    ``report=True`` the tool's ``response_format`` is ``content_and_artifact``: the verdict
    is still its content (what a model calling it reads), and the check's
    ``GroundednessReport`` (each claim with its verdict, support and place in the answer) is
    the artifact: ``ToolMessage.artifact`` when the tool is invoked with a tool call.
    ``check_report`` returns the report directly.

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
    report: bool = Field(
        default=False,
        description="Ask for the check's report and return it as the tool's artifact "
        "(response_format 'content_and_artifact'); the content stays the verdict.",
    )

    @model_validator(mode="after")
    def _report_is_the_artifact(self) -> CoreGroundednessCheck:
        if self.report:
            self.response_format = "content_and_artifact"
        return self

    def _request(self, context: str | list[Document], answer: str) -> dict[str, Any]:
        return groundedness_request(context_texts(context), answer, model=self.model)

    def check_report(self, context: str | list[Document], answer: str) -> GroundednessReport:
        """The check's report: its verdict (the tool's), the weakest claim's support, each
        claim of ``answer`` with its verdict and support, and the answer without what the
        context does not support (``docs/guides/groundedness-report.md``)."""
        return self._get_backend().check_groundedness_report(
            context_texts(context), answer, model=self.model
        )

    async def acheck_report(self, context: str | list[Document], answer: str) -> GroundednessReport:
        """The async twin of ``check_report``."""
        return await self._get_backend().acheck_groundedness_report(
            context_texts(context), answer, model=self.model
        )

    def _run(
        self,
        context: str | list[Document],
        answer: str,
        run_manager: CallbackManagerForToolRun | None = None,
    ) -> Verdict | tuple[Verdict, GroundednessReport]:
        if self.report:
            report = self.check_report(context, answer)
            return report.verdict, report
        return read_verdict(self._get_backend().chat(self._request(context, answer)))

    async def _arun(
        self,
        context: str | list[Document],
        answer: str,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
    ) -> Verdict | tuple[Verdict, GroundednessReport]:
        if self.report:
            report = await self.acheck_report(context, answer)
            return report.verdict, report
        return read_verdict(await self._get_backend().achat(self._request(context, answer)))
