"""LlamaIndex's ``FunctionAgent`` over ``Core`` running a chain of two dependent tool calls to
its end (issue 50): with the model's choices scripted (``tests.agent_chain``), and on the real
small-profile model."""

from __future__ import annotations

import pytest

from backend.testing import RecordingBackend, offline_backend
from tests import agent_chain
from tests.agent_chain import ANSWER, EXPECTED_CALLS, QUESTION, ChainEngine

pytest.importorskip("llama_index.core.agent.workflow")

from llama_index.core.agent.workflow import AgentOutput, FunctionAgent, ToolCallResult  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402

from llamaindex_core_ext import Core  # noqa: E402

TOOLS = [
    FunctionTool.from_defaults(
        fn=agent_chain.find_customer,
        name="find_customer",
        description=agent_chain.FIND_CUSTOMER_DESCRIPTION,
    ),
    FunctionTool.from_defaults(
        fn=agent_chain.get_balance,
        name="get_balance",
        description=agent_chain.GET_BALANCE_DESCRIPTION,
    ),
]


async def _run(backend):
    """Each model turn's calls, each tool result, and the final answer of the agent's run on
    ``QUESTION`` (its iteration limit reached raises ``WorkflowRuntimeError``)."""
    agent = FunctionAgent(
        tools=TOOLS,
        llm=Core(backend=backend, temperature=0, max_tokens=96),
        system_prompt="You answer questions about customers. Use the tools to look them up.",
    )
    handler = agent.run(user_msg=QUESTION)
    turns, results = [], []
    async for event in handler.stream_events():
        if isinstance(event, AgentOutput):  # one per model turn, with the calls it made
            turns.append([(c.tool_name, c.tool_kwargs) for c in event.tool_calls])
        elif isinstance(event, ToolCallResult):
            results.append(str(event.tool_output.content))
    response = await handler
    return turns, results, str(response.response.content or "")


async def test_the_agent_chains_two_dependent_calls_and_answers():
    backend = RecordingBackend(offline_backend(ChainEngine(), profile="small"))
    turns, results, answer = await _run(backend)
    # one call a turn, in order, the id from the first result; then the answer
    assert turns == [[EXPECTED_CALLS[0]], [EXPECTED_CALLS[1]], []]
    assert results == ["Jun Seo: customer id C-7781", "balance of C-7781: 1250 EUR"]
    assert answer == ANSWER
    roles = [[m["role"] for m in r["messages"]] for r in backend.requests]
    assert roles == [
        ["system", "user"],
        ["system", "user", "assistant", "tool"],
        ["system", "user", "assistant", "tool", "assistant", "tool"],
    ]


@pytest.mark.model
async def test_on_the_small_model_the_agent_answers_from_a_result_without_repeating_it(
    small_backend,
):
    turns, results, answer = await _run(small_backend)
    calls = [call for turn in turns for call in turn]
    assert calls[:1] == EXPECTED_CALLS[:1]
    assert answer
