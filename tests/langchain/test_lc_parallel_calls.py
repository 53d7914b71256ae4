"""Several tool calls in one reply through ``ChatCore``, offline: ``bind_tools`` sends
``parallel_tool_calls`` as ChatOpenAI does, every call of a reply reaches the ``AIMessage``
(invoked or streamed), and an agent runs each of them."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from backend.testing import RecordingBackend, ToolLoopEngine, offline_backend, scripted_backend
from langchain_core_ext import ChatCore

TWO_CALLS = (
    '<tool_call>\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
    '{"name": "get_weather", "arguments": {"city": "Tokyo"}}]\n</tool_call>'
)
FORECASTS = {"Paris": "rain, 12 C", "Tokyo": "sunny, 21 C"}


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return FORECASTS[city]


@pytest.mark.parametrize(("parallel", "sent"), [(None, None), (True, True), (False, False)])
def test_bind_tools_sends_parallel_tool_calls_when_given(parallel, sent):
    service = RecordingBackend(scripted_backend(TWO_CALLS))
    ChatCore(backend=service).bind_tools([get_weather], parallel_tool_calls=parallel).invoke("?")
    assert service.requests[-1].get("parallel_tool_calls", None) is sent


@pytest.mark.parametrize("streamed", [False, True])
def test_every_call_of_a_reply_is_in_the_message(streamed):
    llm = ChatCore(backend=scripted_backend(TWO_CALLS)).bind_tools([get_weather])
    if streamed:
        chunks = list(llm.stream("Weather in Paris and Tokyo?"))
        message = chunks[0]
        for chunk in chunks[1:]:
            message += chunk
        assert sorted({c["index"] for c in message.tool_call_chunks}) == [0, 1]
    else:
        message = llm.invoke("Weather in Paris and Tokyo?")
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Tokyo"}),
    ]
    assert len({c["id"] for c in message.tool_calls}) == 2


def test_parallel_tool_calls_false_keeps_one_call():
    llm = ChatCore(backend=scripted_backend(TWO_CALLS))
    message = llm.bind_tools([get_weather], parallel_tool_calls=False).invoke("?")
    assert [c["args"] for c in message.tool_calls] == [{"city": "Paris"}]


def test_an_agent_runs_every_call_of_a_reply():
    from langchain.agents import create_agent

    engine = ToolLoopEngine(TWO_CALLS, answer="Paris: rain; Tokyo: sunny.")
    agent = create_agent(ChatCore(backend=offline_backend(engine)), tools=[get_weather])
    messages = agent.invoke({"messages": [HumanMessage("Weather in Paris and in Tokyo?")]})[
        "messages"
    ]
    [first, *rest] = [m for m in messages if isinstance(m, AIMessage)]
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == [c["id"] for c in first.tool_calls]
    assert [m.content for m in results] == [FORECASTS["Paris"], FORECASTS["Tokyo"]]
    [final] = rest
    assert not final.tool_calls and final.text.startswith("Paris: rain; Tokyo: sunny.")
    # the final turn was generated seeing both results
    for city, forecast in FORECASTS.items():
        assert f"{json.dumps({'city': city})}) returned: {forecast}" in final.text
