"""The adapters through the service's real HTTP server on a loopback port, in front of the
offline scripted backend: the same behaviour as in-process, over SSE and JSON."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from backend.backends.client.http import HTTPBackend
from backend.chat.prompt import DEFAULT_SYSTEM_PROMPT
from backend.protocol.errors import AuthenticationError, BadRequestError
from backend.testing import CharTokenizer, scripted_backend
from backend.testing.servers import TEST_API_KEY
from langchain_core_ext import (
    ChatCore,
    CoreEmbeddings,
    CoreGroundednessCheck,
    CoreGroundednessEvaluator,
)

# A forced call's opening is already in the prompt: the model writes the arguments on.
ADD_ARGUMENTS = '{"a": 1, "b": 2}}\n</tool_call>'


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
def server(scripted_server, monkeypatch):
    """The scripted server, reached through ``CORE_BASE_URL`` / ``CORE_API_KEY``."""
    base_url, service = scripted_server
    monkeypatch.setenv("CORE_BASE_URL", base_url)
    monkeypatch.setenv("CORE_API_KEY", TEST_API_KEY)
    service.requests.clear()

    def reply_with(text: str):
        service.inner = scripted_backend(text)
        return service

    return reply_with


def test_the_environment_selects_the_http_backend(server):
    server("Hi.")
    llm = ChatCore(timeout=5, max_retries=0)
    client = llm._get_backend()
    assert isinstance(client, HTTPBackend) and client.max_retries == 0


@pytest.mark.parametrize("how", ["invoke", "ainvoke", "stream", "astream"])
async def test_text_and_usage(server, how):
    server("Hello over HTTP.")
    llm = ChatCore(temperature=0)
    if how == "invoke":
        message = llm.invoke("hi")
    elif how == "ainvoke":
        message = await llm.ainvoke("hi")
    elif how == "stream":
        message = None
        for chunk in llm.stream("hi"):
            message = chunk if message is None else message + chunk
    else:
        message = None
        async for chunk in llm.astream("hi"):
            message = chunk if message is None else message + chunk
    assert message.content == "Hello over HTTP."
    assert message.usage_metadata["output_tokens"] == len("Hello over HTTP.") + 1
    assert message.response_metadata["model_name"] == "core-1-mini-chat-240502"
    assert message.response_metadata["finish_reason"] == "stop"


async def test_streamed_tool_call(server):
    service = server(ADD_ARGUMENTS)
    llm = ChatCore().bind_tools([add], tool_choice="any")
    chunks = [chunk async for chunk in llm.astream("1+2?")]
    pieces = [piece for chunk in chunks for piece in chunk.tool_call_chunks]
    assert [p["index"] for p in pieces] == [0, 0]
    full = chunks[0]
    for chunk in chunks[1:]:
        full += chunk
    assert full.tool_calls[0]["name"] == "add" and full.tool_calls[0]["args"] == {"a": 1, "b": 2}
    assert service.requests[-1]["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert service.requests[-1]["stream_options"] == {"include_usage": True}


def test_errors_arrive_typed(server):
    server("x")
    with pytest.raises(BadRequestError, match="temperature"):
        ChatCore(temperature=5).invoke("hi")
    with pytest.raises(AuthenticationError):
        ChatCore(api_key="wrong", max_retries=0).invoke("hi")


async def test_embeddings_are_split_into_requests(server):
    service = server("x")
    texts = [f"text number {i}" for i in range(150)]
    vectors = await CoreEmbeddings().aembed_documents(texts)
    assert len(vectors) == 150
    assert [len(r["input"]) for r in service.requests] == [100, 50]
    assert len(CoreEmbeddings().embed_query("q")) == 26


def test_groundedness_check(server):
    service = server("yes")
    docs = [Document("A is 1."), Document("B is 2.")]
    assert CoreGroundednessCheck().invoke({"context": docs, "answer": "A is 1."}) == "grounded"
    assert service.requests[-1]["messages"][0]["content"] == "A is 1.\n\nB is 2."


async def test_the_report_arrives_over_http_as_the_artifact_and_the_evaluators_comment(server):
    server("no")  # the scripted judge finds no claim supported
    docs = [Document("A is 1."), Document("B is 2.")]
    call = {"name": "core_groundedness_check", "id": "c1", "type": "tool_call"}
    call["args"] = {"context": docs, "answer": "A is 3. B is 4."}
    message = await CoreGroundednessCheck(report=True).ainvoke(call)
    report = message.artifact
    assert message.content == report.verdict == "notGrounded"
    assert [claim.text for claim in report.claims] == ["A is 3.", "B is 4."]
    assert report.claims[0].evidence[0].text == "A is 1.\n\nB is 2."  # one short context
    feedback = CoreGroundednessEvaluator().evaluate_groundedness(docs, "A is 3. B is 4.")
    assert feedback["score"] == 0.0
    assert feedback["metadata"]["unsupported_claims"] == ["A is 3.", "B is 4."]


def test_token_counts_over_http_are_the_servers_exact_ones(server):
    server("x")
    llm = ChatCore()
    assert llm.get_token_ids("Hello") == [ord(c) for c in "Hello"]  # the scripted tokenizer
    assert llm.get_num_tokens("Hello, world!") == len("Hello, world!")
    # ...and a conversation counts as the usage a call reports: the template's prompt
    prompt = CharTokenizer().apply_chat_template(
        [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}, {"role": "user", "content": "hi"}]
    )
    assert llm.get_num_tokens_from_messages([HumanMessage("hi")]) == len(prompt)
    usage = llm.invoke("hi").usage_metadata
    assert (usage["input_tokens"], usage["output_tokens"]) == (len(prompt), 2)  # "x" + EOS
