"""Several tool calls in one reply through ``Core``, offline: ``allow_parallel_tool_calls``
goes out as ``parallel_tool_calls``, every call comes back when allowed (the first alone when
not, streamed or not), and a ``FunctionAgent`` runs each call of a reply."""

from __future__ import annotations

import json

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.tools import FunctionTool

from backend.testing import ToolLoopEngine, offline_backend
from llamaindex_core_ext import Core

TWO_CALLS = (
    '<tool_call>\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
    '{"name": "get_weather", "arguments": {"city": "Tokyo"}}]\n</tool_call>'
)
FORECASTS = {"Paris": "rain, 12 C", "Tokyo": "sunny, 21 C"}


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return FORECASTS[city]


WEATHER = FunctionTool.from_defaults(get_weather)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("streamed", [False, True])
async def test_parallel_calls_are_asked_for_and_returned_as_allowed(scripted, parallel, streamed):
    backend = scripted(TWO_CALLS)
    llm = Core(backend=backend)
    options = {"user_msg": "Paris and Tokyo?", "allow_parallel_tool_calls": parallel}
    if streamed:
        stream = await llm.astream_chat_with_tools([WEATHER], **options)
        response = [r async for r in stream][-1]
    else:
        response = await llm.achat_with_tools([WEATHER], **options)
    assert backend.requests[-1]["parallel_tool_calls"] is parallel
    calls = llm.get_tool_calls_from_response(response)
    assert [c.tool_kwargs["city"] for c in calls] == ["Paris", "Tokyo"][: 2 if parallel else 1]
    assert len({c.tool_id for c in calls}) == len(calls)


def test_no_tools_sends_no_parallel_tool_calls(scripted):
    backend = scripted("Hello.")
    Core(backend=backend).chat_with_tools([], user_msg="hi", allow_parallel_tool_calls=True)
    assert "parallel_tool_calls" not in backend.requests[-1]


async def test_function_agent_runs_every_call_of_a_reply():
    engine = ToolLoopEngine(TWO_CALLS, answer="Paris: rain; Tokyo: sunny.")
    agent = FunctionAgent(tools=[WEATHER], llm=Core(backend=offline_backend(engine)))
    handler = agent.run("Weather in Paris and in Tokyo?", max_iterations=3)
    results = [e async for e in handler.stream_events() if isinstance(e, ToolCallResult)]
    answer = str(await handler)

    assert [(r.tool_name, r.tool_kwargs) for r in results] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Tokyo"}),
    ]
    assert [r.tool_output.content for r in results] == [FORECASTS["Paris"], FORECASTS["Tokyo"]]
    assert answer.startswith("Paris: rain; Tokyo: sunny.")
    for city, forecast in FORECASTS.items():  # the answer was generated seeing both results
        assert f"{json.dumps({'city': city})}) returned: {forecast}" in answer
