"""The agent benchmark's loops on offline backends (no model): what they read and record."""

from __future__ import annotations

import json

import pytest

from backend.protocol.schemas import ChatCompletion
from backend.protocol.schemas.chat_response import AssistantMessage, Choice, Usage
from backend.protocol.schemas.tools import FunctionCall, ToolCall
from backend.testing.backends import StubBackend, scripted_backend
from benchmarks.agents.runners import OPENAI_MAX_ROUNDS, RUNNERS, RecordingBackend
from benchmarks.agents.scoring import load_tasks, score

WEATHER_TASK = next(t for t in load_tasks() if t["id"] == "one_step-01")  # Paris, 11 °C


@pytest.mark.parametrize("framework", sorted(RUNNERS))
def test_a_plain_answer_ends_each_loop_after_one_turn(framework):
    backend = RecordingBackend(scripted_backend("Paris is at 11 °C today."))
    run = RUNNERS[framework](WEATHER_TASK, backend, 0.0)
    assert run.transcript.calls == [] and run.transcript.turns == 1
    assert run.transcript.answer == "Paris is at 11 °C today." and not run.limit_reached
    assert score(WEATHER_TASK, run.transcript).success
    [request] = run.requests  # noted by the recorder, then taken
    assert request["tools"] == len(WEATHER_TASK["tools"]) and request["roles"] == ["user"]
    assert backend.take() == []


class AlwaysCalling(StubBackend):
    """Answers every request with the same call, as a model stuck in a loop would."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

    def chat(self, request) -> ChatCompletion:
        self.requests.append(json.loads(json.dumps(request)))
        call = ToolCall(
            id=f"call_{len(self.requests)}",
            function=FunctionCall(name="get_weather", arguments='{"city": "Paris"}'),
        )
        return ChatCompletion(
            id="chatcmpl-1",
            created=0,
            model="core-1-mini-chat",
            choices=[
                Choice(
                    message=AssistantMessage(content=None, tool_calls=[call]), finish_reason="stop"
                )
            ],
            usage=Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2),
        )


def test_the_openai_loop_answers_each_call_and_stops_at_its_round_limit():
    stuck = AlwaysCalling()
    run = RUNNERS["openai"](WEATHER_TASK, RecordingBackend(stuck), 0.0)
    assert run.limit_reached and run.transcript.answer == ""
    assert run.transcript.turns == len(stuck.requests) == OPENAI_MAX_ROUNDS
    assert run.transcript.calls == [("get_weather", {"city": "Paris"})] * OPENAI_MAX_ROUNDS
    result = score(WEATHER_TASK, run.transcript)
    assert (result.success, result.repeated_calls) == (False, OPENAI_MAX_ROUNDS - 1)
    last = stuck.requests[-1]
    assert last["tool_choice"] == "auto"
    assert [m["role"] for m in last["messages"]] == ["user"] + ["assistant", "tool"] * (
        OPENAI_MAX_ROUNDS - 1
    )
    assert last["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Paris: 11 °C, cloudy",
    }
