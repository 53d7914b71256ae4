"""LangChain's ``create_agent`` over ``ChatCore`` running a chain of two dependent tool calls
to its end (issue 50): with the model's choices scripted (``tests.agent_chain``), and on the
real small-profile model."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from backend.testing import RecordingBackend, offline_backend
from langchain_core_ext import ChatCore
from tests import agent_chain
from tests.agent_chain import ANSWER, EXPECTED_CALLS, QUESTION, ChainEngine

langchain_agents = pytest.importorskip("langchain.agents")


@tool(description=agent_chain.FIND_CUSTOMER_DESCRIPTION)
def find_customer(name: str) -> str:
    return agent_chain.find_customer(name)


@tool(description=agent_chain.GET_BALANCE_DESCRIPTION)
def get_balance(customer_id: str) -> str:
    return agent_chain.get_balance(customer_id)


def _run(backend) -> list:
    """The agent's messages at the end of its run on ``QUESTION`` (a limit reached raises
    ``GraphRecursionError``)."""
    agent = langchain_agents.create_agent(
        ChatCore(backend=backend, temperature=0, max_tokens=96),
        tools=[find_customer, get_balance],
        system_prompt="You answer questions about customers. Use the tools to look them up.",
    )
    return agent.invoke({"messages": [HumanMessage(QUESTION)]})["messages"]


def _calls(messages) -> list[tuple[str, dict]]:
    return [
        (call["name"], call["args"])
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    ]


def test_the_agent_chains_two_dependent_calls_and_answers():
    engine = ChainEngine()
    backend = RecordingBackend(offline_backend(engine, profile="small"))
    messages = _run(backend)
    assert _calls(messages) == EXPECTED_CALLS  # in order, the id from the first result
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert results == ["Jun Seo: customer id C-7781", "balance of C-7781: 1250 EUR"]
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls and final.text == ANSWER
    # three model turns, each offered both tools with the whole conversation so far
    roles = [[m["role"] for m in r["messages"]] for r in backend.requests]
    assert roles == [
        ["system", "user"],
        ["system", "user", "assistant", "tool"],
        ["system", "user", "assistant", "tool", "assistant", "tool"],
    ]
    assert all(len(r["tools"]) == 2 for r in backend.requests)


@pytest.mark.model
def test_on_the_small_model_the_agent_answers_from_a_result_without_repeating_it(small_backend):
    messages = _run(small_backend)
    calls = _calls(messages)
    assert calls[:1] == EXPECTED_CALLS[:1]
    assert len({(name, tuple(sorted(args.items()))) for name, args in calls}) == len(calls)
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls and final.text
