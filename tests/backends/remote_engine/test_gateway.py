"""This project's server in front of a real engine (the gateway): the openai SDK and both
adapters work against it unchanged; the adapters also take the engine options themselves."""

from __future__ import annotations

import json

import numpy as np
import pytest

from backend.protocol.catalogue import PASSAGE_MODEL, QUERY_MODEL
from backend.testing.servers import running_server
from langchain_core_ext import ChatCore, CoreEmbeddings, CoreGroundednessCheck
from llamaindex_core_ext import Core, CoreEmbedding, CoreGroundednessEvaluator
from tests.tools import WEATHER

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.model

CONTEXT = "The museum opens at 10:00 and closes at 18:00 every day except Monday."


@pytest.fixture(scope="module")
def gateway(engine_options):
    from backend.backends.remote_engine import EngineBackend

    service = EngineBackend(**engine_options)
    with running_server(service) as running:
        yield running
    service.close()


def test_the_openai_sdk_chats_streams_calls_tools_and_embeds(gateway):
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1/core", api_key=gateway.api_key, max_retries=0)
    messages = [{"role": "user", "content": "What is the capital of Japan? One word."}]
    reply = sdk.chat.completions.create(
        model="core-1-mini-chat", messages=messages, temperature=0, max_tokens=8
    )
    assert "tokyo" in reply.choices[0].message.content.lower()
    stream = sdk.chat.completions.create(
        model="core-1-mini-chat", messages=messages, temperature=0, max_tokens=8, stream=True
    )
    chunks = list(stream)
    assert len({c.id for c in chunks}) == 1
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        reply.choices[0].message.content
    )
    call = (
        sdk.chat.completions.create(
            model="core-1-mini-chat",
            messages=[{"role": "user", "content": "What's the weather in Oslo right now?"}],
            tools=[WEATHER],
            temperature=0,
        )
        .choices[0]
        .message.tool_calls[0]
    )
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"].lower() == "oslo"
    vectors = sdk.embeddings.create(model=QUERY_MODEL, input=["ferry", "배"])
    assert len(vectors.data) == 2 and len(vectors.data[0].embedding) == 384
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(
            base_url=f"{gateway.url}/v1/core", api_key="wrong", max_retries=0
        ).models.list()


def test_the_adapters_work_against_the_gateway_unchanged(gateway):
    options = {"base_url": gateway.url, "api_key": gateway.api_key}
    answer = ChatCore(model="core-1-mini-chat", temperature=0, max_tokens=8, **options).invoke(
        "What is 2 + 2? Answer with the number."
    )
    assert "4" in answer.content
    assert (
        CoreGroundednessCheck(**options).invoke(
            {"context": CONTEXT, "answer": "It opens at 10:00."}
        )
        == "grounded"
    )
    llm = Core(model="core-1-mini-chat", temperature=0, max_tokens=8, **options)
    assert "4" in llm.complete("What is 2 + 2? Answer with the number.").text
    assert len(CoreEmbedding(**options).get_text_embedding("ferry")) == 384


def test_the_adapters_take_the_engine_options(engine_options, small_backend):
    chat = ChatCore(model="core-1-mini-chat", temperature=0, max_tokens=8, **engine_options)
    assert "4" in chat.invoke("What is 2 + 2? Answer with the number.").content
    texts = ["The ferry leaves at nine.", "東京は日本の首都です。"]
    remote = np.array(CoreEmbeddings(**engine_options).embed_documents(texts))
    local = np.array(small_backend.embed({"model": PASSAGE_MODEL, "input": texts}).float_vectors())
    assert np.sum(remote * local, axis=1).min() >= 0.9999
    check = CoreGroundednessCheck(**engine_options)
    assert check.invoke({"context": CONTEXT, "answer": "It closes at 20:00."}) == "notGrounded"
    llm = Core(model="core-1-mini-chat", temperature=0, max_tokens=8, **engine_options)
    assert "4" in llm.complete("What is 2 + 2? Answer with the number.").text
    assert len(CoreEmbedding(**engine_options).get_query_embedding("ferry")) == 384
    evaluator = CoreGroundednessEvaluator(**engine_options)
    result = evaluator.evaluate(response="The museum opens at 10:00.", contexts=[CONTEXT])
    assert result.passing is True
