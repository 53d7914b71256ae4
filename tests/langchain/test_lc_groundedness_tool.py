"""``CoreGroundednessCheck`` offline: the standard unit suite and the request it sends."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_tests.unit_tests import ToolsUnitTests

from backend.protocol.errors import BadRequestError
from langchain_core_ext import CoreGroundednessCheck
from langchain_core_ext.tools import GroundednessCheckInput, context_texts


class TestCoreGroundednessCheckUnit(ToolsUnitTests):
    @property
    def tool_constructor(self) -> type[CoreGroundednessCheck]:
        return CoreGroundednessCheck

    @property
    def tool_invoke_params_example(self) -> dict:
        return {
            "context": "Paris is the capital of France.",
            "answer": "France's capital is Paris.",
        }

    @property
    def init_from_env_params(self) -> tuple[dict, dict, dict]:
        return ({"CORE_BASE_URL": "http://127.0.0.1:9"}, {}, {"base_url": "http://127.0.0.1:9"})


def test_name_and_schema():
    check = CoreGroundednessCheck()
    assert check.name == "core_groundedness_check"
    assert set(check.args) == {"context", "answer"}
    parsed = GroundednessCheckInput(context=[{"page_content": "a"}], answer="b")
    assert isinstance(parsed.context[0], Document)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(("label", "verdict"), [("yes", "grounded"), ("no", "notGrounded")])
async def test_verdicts(scripted, use_async, label, verdict):
    # The scripted engine answers "yes" when its reply starts with "y", else "no".
    check = CoreGroundednessCheck(backend=scripted(label))
    args = {"context": "The sky is blue.", "answer": "The sky is blue."}
    result = await check.ainvoke(args) if use_async else check.invoke(args)
    assert result == verdict


def test_documents_are_joined_with_blank_lines(scripted):
    service = scripted("yes")
    docs = [Document(page_content="First fact."), Document(page_content="Second fact.")]
    CoreGroundednessCheck(backend=service).invoke({"context": docs, "answer": "A fact."})
    assert service.requests[-1] == {
        "model": "core-1-mini-groundedness-check",
        "messages": [
            {"role": "user", "content": "First fact.\n\nSecond fact."},
            {"role": "assistant", "content": "A fact."},
        ],
    }
    assert context_texts("plain") == "plain"


def test_tool_call_input_gives_a_tool_message(scripted):
    check = CoreGroundednessCheck(backend=scripted("yes"))
    message = check.invoke(
        {
            "name": check.name,
            "id": "call_1",
            "type": "tool_call",
            "args": {"context": "x is 1", "answer": "x is 1"},
        }
    )
    assert (message.content, message.tool_call_id) == ("grounded", "call_1")


def test_empty_answer_is_the_services_400(scripted):
    with pytest.raises(BadRequestError, match="assistant message content is required"):
        CoreGroundednessCheck(backend=scripted("yes")).invoke({"context": "x", "answer": ""})
