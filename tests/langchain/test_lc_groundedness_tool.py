"""``CoreGroundednessCheck`` offline: the standard unit suite and the request it sends."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_tests.unit_tests import ToolsUnitTests

from backend.protocol.errors import BadRequestError
from backend.protocol.groundedness_report import GroundednessReport
from backend.testing import EchoChatEngine, RecordingBackend, offline_backend
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


# ---------------------------------------------------------------- the report as the artifact


def _echo_judge():
    """An offline backend whose judge finds a claim supported exactly when its document holds
    it verbatim (``EchoChatEngine``), so a report has both kinds of claims."""
    return RecordingBackend(offline_backend(EchoChatEngine()))


TOWER = {
    "context": "The tower is tall. It opened in 1889.",
    "answer": "The tower is tall. It is blue.",
}


@pytest.mark.parametrize("use_async", [False, True])
async def test_report_is_the_artifact_and_the_verdict_stays_the_content(use_async):
    check = CoreGroundednessCheck(backend=_echo_judge(), report=True)
    assert check.response_format == "content_and_artifact"
    call = {"name": check.name, "id": "call_7", "type": "tool_call", "args": TOWER}
    message = await check.ainvoke(call) if use_async else check.invoke(call)
    assert (message.content, message.tool_call_id) == ("notGrounded", "call_7")
    report = message.artifact
    assert isinstance(report, GroundednessReport) and report.verdict == "notGrounded"
    assert [(c.text, c.verdict) for c in report.claims] == [
        ("The tower is tall.", "grounded"),
        ("It is blue.", "notGrounded"),
    ]
    assert report.corrected_response == "The tower is tall."
    # Invoked with its arguments alone, a tool answers its content: the verdict, as before.
    assert (await check.ainvoke(TOWER) if use_async else check.invoke(TOWER)) == "notGrounded"


@pytest.mark.parametrize("use_async", [False, True])
async def test_check_report_reads_documents_as_the_check_does(use_async):
    service = _echo_judge()
    check = CoreGroundednessCheck(backend=service)
    docs = [Document(page_content="The tower is tall."), Document(page_content="It is old.")]
    if use_async:
        report = await check.acheck_report(docs, "It is old.")
    else:
        report = check.check_report(docs, "It is old.")
    assert report.verdict == "grounded"
    evidence = report.claims[0].evidence
    assert (
        "The tower is tall.\n\nIt is old."[evidence[0].start : evidence[0].end] == evidence[0].text
    )
    assert check.response_format == "content"  # no report asked: the tool is as it was


def test_report_matches_the_plain_verdict_on_the_small_model(small_backend):
    args = {
        "context": "The Eiffel Tower is 330 metres tall. It opened in 1889.",
        "answer": "The Eiffel Tower is 330 metres tall. It was painted blue in 2020.",
    }
    plain = CoreGroundednessCheck(backend=small_backend).invoke(args)
    call = {"name": "core_groundedness_check", "id": "c", "type": "tool_call", "args": args}
    message = CoreGroundednessCheck(backend=small_backend, report=True).invoke(call)
    assert message.content == message.artifact.verdict == plain
    report = message.artifact
    assert [args["answer"][c.start : c.end] for c in report.claims] == [
        c.text for c in report.claims
    ]
