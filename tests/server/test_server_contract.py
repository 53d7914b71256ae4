"""One contract, two backends: the same expectations against the in-process backend and the
HTTP backend talking to a real server, both on the real small models.

Generations are few and short (greedy, ``max_tokens`` 8), so answers are deterministic and
the HTTP answers must equal the in-process ones.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator

import numpy as np
import pytest

from backend.backends.client.http import HTTPBackend
from backend.interface import Backend
from backend.protocol.errors import BadRequestError, CoreError, NotFoundError
from tests.server.helpers import API_KEY

pytestmark = pytest.mark.model

CHAT = "core-1-mini-chat"
GROUNDEDNESS = "core-1-mini-groundedness-check"
MAX_TOKENS = 8
ASK = {
    "model": CHAT,
    "messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Name one primary colour."},
    ],
    "temperature": 0,
    "max_tokens": MAX_TOKENS,
}
CHECK = {
    "model": GROUNDEDNESS,
    "messages": [
        {"role": "user", "content": "The Eiffel Tower is in Paris and is 330 m tall."},
        {"role": "assistant", "content": "The Eiffel Tower is in Paris."},
    ],
    "temperature": 0,
}
TEXTS = ["How tall is the Eiffel Tower?", "에펠탑은 파리에 있다.", "Le ciel est bleu."]


@contextlib.asynccontextmanager
async def async_subject(service: Backend) -> AsyncIterator[Backend]:
    """The backend for one async test: an HTTP client's pool belongs to one event loop."""
    if not isinstance(service, HTTPBackend):
        yield service
        return
    client = HTTPBackend(service.base_url, api_key=API_KEY, max_retries=0, timeout=300)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture(scope="session")
def reference(small_backend):
    """In-process sync answers, computed once: every other path must reproduce them."""
    return {"chat": small_backend.chat(ASK), "check": small_backend.chat(CHECK)}


def _sync_chat(service, small_backend, reference, request, key):
    """The in-process sync answer is the reference itself (one generation fewer)."""
    return reference[key] if service is small_backend else service.chat(request)


def _check_completion(completion, reference) -> None:
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "core-1-mini-chat-240502"
    assert completion.system_fingerprint is None
    (choice,) = completion.choices
    assert choice.index == 0 and choice.logprobs is None
    assert choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length")
    usage = completion.usage
    assert 0 < usage.completion_tokens <= MAX_TOKENS
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    expected = reference["chat"]
    assert choice.message.content == expected.choices[0].message.content
    assert usage == expected.usage


def test_chat(service, small_backend, reference):
    _check_completion(_sync_chat(service, small_backend, reference, ASK, "chat"), reference)


async def test_achat(service, reference):
    async with async_subject(service) as subject:
        _check_completion(await subject.achat(ASK), reference)


def test_groundedness_verdict(service, small_backend, reference):
    result = _sync_chat(service, small_backend, reference, CHECK, "check")
    assert result.model == "core-1-mini-groundedness-check-240502"
    assert result.choices[0].message.content in ("grounded", "notGrounded", "notSure")
    assert result.choices[0].message.content == reference["check"].choices[0].message.content
    assert result.usage.prompt_tokens > 0


def test_groundedness_report(service, reference):
    """The report's verdict and usage are the plain check's: the same readings, kept."""
    context, response = (m["content"] for m in CHECK["messages"])
    report = service.check_groundedness_report(context, response)
    assert report.model == "core-1-mini-groundedness-check-240502"
    assert report.verdict == reference["check"].choices[0].message.content
    assert report.usage.prompt_tokens == reference["check"].usage.prompt_tokens
    for claim in report.claims:
        assert response[claim.start : claim.end] == claim.text
        assert all(context[e.start : e.end] == e.text for e in claim.evidence)


def _check_stream(chunks, reference) -> None:
    assert len({(c.id, c.created) for c in chunks}) == 1
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    *body, usage_chunk = chunks
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert all(c.usage is None for c in body)
    assert body[-1].choices[0].finish_reason in ("stop", "length")
    content = "".join(c.choices[0].delta.content or "" for c in body)
    assert content == reference["chat"].choices[0].message.content
    assert usage_chunk.usage == reference["chat"].usage


def test_stream_chat(service, reference):
    request = {**ASK, "stream_options": {"include_usage": True}}
    _check_stream(list(service.stream_chat(request)), reference)


async def test_astream_chat(service, reference):
    request = {**ASK, "stream_options": {"include_usage": True}}
    async with async_subject(service) as subject:
        _check_stream([c async for c in await subject.astream_chat(request)], reference)


def _decode(item) -> np.ndarray:
    return np.frombuffer(base64.b64decode(item.embedding), dtype="<f4")


EMBEDDING_MODELS = ["core-embedding-1-large-query", "core-embedding-1-large-passage"]


@pytest.mark.parametrize("model", EMBEDDING_MODELS)
def test_embeddings_float_and_base64_agree(service, small_backend, model):
    floats = service.embed({"model": model, "input": TEXTS})
    packed = service.embed({"model": model, "input": TEXTS, "encoding_format": "base64"})
    assert floats.object == "list" and floats.model == model
    assert [d.index for d in floats.data] == [0, 1, 2]
    vectors = np.array([d.embedding for d in floats.data], dtype=np.float32)
    np.testing.assert_array_equal(vectors, np.stack([_decode(d) for d in packed.data]))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-4)
    reference = small_backend.embed({"model": model, "input": TEXTS})
    np.testing.assert_allclose(vectors, [d.embedding for d in reference.data], atol=1e-6)
    assert floats.usage == reference.usage and floats.usage.prompt_tokens > 0


async def test_aembed_single_string(service):
    async with async_subject(service) as subject:
        result = await subject.aembed({"model": "core-embedding-1-large-query", "input": TEXTS[0]})
    assert len(result.data) == 1 and result.data[0].index == 0


def test_models(service, small_backend):
    assert service.models() == small_backend.models()


# ---------------------------------------------------------------- errors (no generation)

ERRORS = {
    "two user messages": (
        {**CHECK, "messages": [{"role": "user", "content": "a"}, *CHECK["messages"]]},
        BadRequestError,
        "invalid request: 1 user message expected, found 2",
    ),
    "no assistant message": (
        {**CHECK, "messages": CHECK["messages"][:1]},
        BadRequestError,
        "invalid request: 1 assistant message expected, found 0",
    ),
    "empty user content": (
        {**CHECK, "messages": [{"role": "user", "content": ""}, CHECK["messages"][1]]},
        BadRequestError,
        "invalid request: user message content is required",
    ),
    "missing assistant content": (
        {**CHECK, "messages": [CHECK["messages"][0], {"role": "assistant"}]},
        BadRequestError,
        "invalid request: assistant message content is required",
    ),
    "unknown model": ({**ASK, "model": "core-2-huge"}, NotFoundError, None),
    "temperature out of range": (
        {**ASK, "temperature": 2.5},
        BadRequestError,
        "invalid request: temperature: temperature must be between 0 and 2, got 2.5",
    ),
}


def _caught(call, request) -> CoreError:
    with pytest.raises(CoreError) as caught:
        call(request)
    return caught.value


@pytest.mark.parametrize("case", sorted(ERRORS))
@pytest.mark.parametrize("method", ["chat", "stream_chat"])
def test_errors_match_the_in_process_ones(service, small_backend, case, method):
    request, error_type, message = ERRORS[case]
    error = _caught(getattr(service, method), request)  # a stream fails when called
    expected = _caught(getattr(small_backend, method), request)
    assert type(error) is error_type and error.status_code == error_type.status_code
    assert error.body == expected.body
    if message is not None:
        assert error.message == message
        assert error.body.error.type == "invalid_request_error"


async def test_async_errors_match(service, small_backend):
    request, error_type, message = ERRORS["temperature out of range"]
    async with async_subject(service) as subject:
        for call in (subject.achat, subject.astream_chat):
            with pytest.raises(error_type, match=message):
                await call(request)


def test_embedding_errors_match(service, small_backend):
    for request in (
        {"model": "core-embedding-1-large-query", "input": ["ok", ""]},
        {"model": "core-embedding-1-large-query", "input": ["x"] * 101},
        {"model": "core-1-mini-chat", "input": "x"},
    ):
        assert _caught(service.embed, request).body == _caught(small_backend.embed, request).body
