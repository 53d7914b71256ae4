"""The groundedness report on the offline doubles: in-process, sync and async, over a real
server on loopback (``POST /v1/core/groundedness/report`` and ``core_report`` on the spec
check), with the spec check's answer unchanged when the option is absent."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from backend.protocol.errors import BadRequestError, NotFoundError
from backend.protocol.groundedness_report import GroundednessReport
from backend.protocol.schemas import ChatCompletion
from backend.testing import EchoChatEngine, offline_backend
from backend.testing.servers import RunningServer, running_server

GROUNDEDNESS = "core-1-mini-groundedness-check"
CONTEXT = "The tower is 330 m tall. It opened in 1889. 席数は24席である。"
RESPONSE = "The tower is 330 m tall.  It is blue.\n席数は24席である。"
CHECK = {
    "model": GROUNDEDNESS,
    "messages": [
        {"role": "user", "content": CONTEXT},
        {"role": "assistant", "content": RESPONSE},
    ],
}
SPEC_MEMBERS = {"id", "object", "created", "model", "system_fingerprint", "choices", "usage"}


@pytest.fixture(scope="module")
def local():
    """The in-process backend on the echo engine, whose judge finds a claim supported
    exactly when its document holds it verbatim."""
    backend = offline_backend(EchoChatEngine())
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def server(local) -> Iterator[RunningServer]:
    with running_server(local) as running:
        yield running


def assert_promises(report: GroundednessReport, context: str, response: str) -> None:
    for claim in report.claims:
        assert response[claim.start : claim.end] == claim.text
        for evidence in claim.evidence:
            assert context[evidence.start : evidence.end] == evidence.text


def test_the_report_in_process(local):
    report = local.check_groundedness_report(CONTEXT, RESPONSE)
    assert report.verdict == local.check_groundedness(CONTEXT, RESPONSE).verdict == "notGrounded"
    assert report.model == "core-1-mini-groundedness-check-240502"
    assert [c.verdict for c in report.claims] == ["grounded", "notGrounded", "grounded"]
    assert report.corrected_response == "The tower is 330 m tall.  席数は24席である。"
    assert report.offset_unit == "code_point"
    assert report.usage.prompt_tokens > 0 and report.usage.completion_tokens == 0
    assert_promises(report, CONTEXT, RESPONSE)


async def test_the_async_twins_answer_alike(local):
    report = await local.acheck_groundedness_report(CONTEXT, RESPONSE)
    assert report == local.check_groundedness_report(CONTEXT, RESPONSE)
    assert (await local.acheck_groundedness(CONTEXT, RESPONSE)).verdict == report.verdict


def test_a_list_of_contexts_counts_offsets_in_the_joined_text(local):
    texts = ["It opened in 1889.", "The tower is 330 m tall."]
    report = local.check_groundedness_report(texts, "The tower is 330 m tall.")
    assert report.verdict == "grounded"
    assert_promises(report, "\n\n".join(texts), "The tower is 330 m tall.")


def test_over_http_the_report_is_the_in_process_one(local, server):
    with server.client(max_retries=0) as client:
        remote = client.check_groundedness_report(CONTEXT, RESPONSE)
    assert remote == local.check_groundedness_report(CONTEXT, RESPONSE)


async def test_over_http_async(local, server):
    async with server.client(max_retries=0) as client:
        remote = await client.acheck_groundedness_report(CONTEXT, RESPONSE)
    assert remote == local.check_groundedness_report(CONTEXT, RESPONSE)


def _post(server: RunningServer, path: str, body: dict) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    return httpx.post(f"{server.url}/v1/core{path}", json=body, headers=headers, timeout=60)


def test_the_spec_check_answers_as_before_without_the_option(server):
    answer = _post(server, "/chat/completions", CHECK)
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == SPEC_MEMBERS
    # Exactly the spec's completion: what the ChatCompletion model writes, member for member.
    assert ChatCompletion.model_validate_json(answer.content).model_dump(mode="json") == body
    assert body["choices"][0]["message"]["content"] == "notGrounded"


def test_core_report_adds_the_report_beside_the_same_answer(server, local):
    plain = _post(server, "/chat/completions", CHECK).json()
    answer = _post(server, "/chat/completions", {**CHECK, "core_report": True}).json()
    assert set(answer) == SPEC_MEMBERS | {"core_report"}
    assert answer["choices"] == plain["choices"] and answer["usage"] == plain["usage"]
    report = GroundednessReport.model_validate(answer["core_report"])
    assert report == local.check_groundedness_report(CONTEXT, RESPONSE)
    assert set(_post(server, "/chat/completions", {**CHECK, "core_report": False}).json()) == (
        SPEC_MEMBERS
    )


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"context": "", "response": "x"}, 400, "context must not be empty"),
        ({"context": [], "response": "x"}, 400, "context must not be empty"),
        ({"context": "x", "response": ""}, 400, "response"),
        ({"context": "x"}, 400, "response"),
        ({"model": "core-1-mini-chat", "context": "x", "response": "y"}, 400, "groundedness"),
        ({"model": "no-such-model", "context": "x", "response": "y"}, 404, "no-such-model"),
    ],
)
def test_bad_report_requests_answer_the_error_object(server, body, status, words):
    answer = _post(server, "/groundedness/report", body)
    assert answer.status_code == status
    assert words in answer.json()["error"]["message"]


def test_core_report_refused_where_it_cannot_be_given(local):
    with pytest.raises(BadRequestError, match="core_report is for the groundedness check"):
        local.chat(
            {"model": "core-1-mini-chat", "messages": CHECK["messages"][:1], "core_report": True}
        )
    with pytest.raises(BadRequestError, match="not available with stream"):
        local.stream_chat({**CHECK, "core_report": True})
    with pytest.raises(NotFoundError):
        local.check_groundedness_report(CONTEXT, RESPONSE, model="no-such-model")


def test_the_openapi_document_describes_the_route(server):
    document = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    operation = document["paths"]["/v1/core/groundedness/report"]["post"]
    assert "200" in operation["responses"] and "400" in operation["responses"]
    claim = document["components"]["schemas"]["ReportClaim"]["properties"]
    assert "code points" in json.dumps(claim["start"])
