"""Real LlamaIndex pipelines on the small-profile models (CPU): retrieval and answering from a
vector index, the groundedness evaluator on that answer, a function-calling agent, and
streaming with usage. Generations are short and greedy; LlamaIndex's ``Settings`` point at our
models and the chat model's own tokenizer, and the network guard fails any download."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.tools import FunctionTool

from llamaindex_core_ext import Core, CoreEmbedding, CoreGroundednessEvaluator

pytestmark = pytest.mark.model

DOCUMENTS = [
    Document(
        text="The Zorblax lighthouse on Kelmer Island is painted bright green and was built "
        "in 1873.",
        metadata={"topic": "lighthouse"},
    ),
    Document(
        text="The Fennick river bakery sells dark rye bread every Tuesday morning.",
        metadata={"topic": "bakery"},
    ),
    Document(
        text="Mount Arvel's observatory opened in 1921 and houses a two-metre telescope.",
        metadata={"topic": "observatory"},
    ),
]
QUESTION = "What colour is the Zorblax lighthouse?"


@pytest.fixture(scope="module")
def rag_answer(li_settings):
    """A vector index over the documents (``CoreEmbedding``) and a query engine's (``Core``)
    answer to ``QUESTION``."""
    index = VectorStoreIndex.from_documents(DOCUMENTS)
    return index.as_query_engine(similarity_top_k=1).query(QUESTION)


def test_query_engine_answers_from_the_right_node(rag_answer):
    (source,) = rag_answer.source_nodes
    assert source.node.metadata["topic"] == "lighthouse"
    assert "green" in rag_answer.response.lower()


def test_groundedness_of_the_answer(small_backend, rag_answer):
    evaluator = CoreGroundednessEvaluator(backend=small_backend)
    result = evaluator.evaluate_response(query=QUESTION, response=rag_answer)
    assert result.feedback.startswith("grounded: all") and result.passing and result.score == 1.0
    assert result.contexts == [DOCUMENTS[0].text]


async def test_groundedness_of_a_contradicted_answer(small_backend):
    evaluator = CoreGroundednessEvaluator(backend=small_backend)
    result = await evaluator.aevaluate(
        query=QUESTION,
        response="The Zorblax lighthouse is painted red.",
        contexts=[DOCUMENTS[0].text],
    )
    assert not result.passing and result.score == 0.0
    assert result.feedback.startswith("notGrounded: 1 of 1 claim not supported by the context")
    assert '"The Zorblax lighthouse is painted red."' in result.feedback


async def test_function_agent_calls_the_tool_and_answers_from_its_result(
    small_backend, li_settings
):
    looked_up: list[str] = []

    def get_order_status(order_id: str) -> str:
        """Look up the shipping status of an order by its id."""
        looked_up.append(order_id)
        return f"Order {order_id} was shipped by Falcon Freight."

    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(get_order_status)],
        llm=Core(backend=small_backend, temperature=0.0, max_tokens=64),
        system_prompt="You answer questions about orders. Use the tools.",
    )
    handler = agent.run("Which carrier shipped order 8812?", max_iterations=3)
    results = [
        event async for event in handler.stream_events() if isinstance(event, ToolCallResult)
    ]
    answer = await handler

    assert looked_up == ["8812"]
    assert [(r.tool_name, r.tool_kwargs) for r in results] == [
        ("get_order_status", {"order_id": "8812"})
    ]
    assert "falcon freight" in str(answer).lower()


QUICK = [ChatMessage(role="user", content="Name a primary colour. One word.")]


def test_stream_chat_carries_usage_and_matches_chat(small_backend):
    llm = Core(backend=small_backend, temperature=0.0, max_tokens=8)
    streamed = list(llm.stream_chat(QUICK))
    final = streamed[-1]
    usage = final.additional_kwargs
    assert 0 < usage["completion_tokens"] <= 8 and usage["prompt_tokens"] > 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert "".join(r.delta or "" for r in streamed) == final.message.content
    assert final.raw.usage.total_tokens == usage["total_tokens"]

    plain = llm.chat(QUICK)  # greedy: the same text and the same counts
    assert plain.message.content == final.message.content
    assert plain.additional_kwargs == usage


async def test_astream_complete_carries_usage(small_backend):
    llm = Core(backend=small_backend, temperature=0.0, max_tokens=8)
    streamed = [r async for r in await llm.astream_complete("Name a primary colour. One word.")]
    final = streamed[-1]
    assert "".join(r.delta or "" for r in streamed) == final.text
    assert 0 < final.additional_kwargs["completion_tokens"] <= 8


async def test_over_http(small_backend, core_http_env):
    # Every adapter finds the server through CORE_BASE_URL / CORE_API_KEY.
    llm = Core(temperature=0.0, max_tokens=8)
    streamed = [r async for r in await llm.astream_chat(QUICK)]
    assert 0 < streamed[-1].additional_kwargs["completion_tokens"] <= 8
    assert "".join(r.delta or "" for r in streamed) == streamed[-1].message.content

    remote = CoreEmbedding().get_query_embedding(QUESTION)
    local = CoreEmbedding(backend=small_backend).get_query_embedding(QUESTION)
    assert np.allclose(remote, local, atol=1e-5)

    result = CoreGroundednessEvaluator().evaluate(
        response="It is green.", contexts=[DOCUMENTS[0].text]
    )
    assert result.passing
