"""After tool results the default profile calls whenever the model gives a call's opening the
profile's share of its probability (``backend.chat.call_after_results``), offline: which
generations carry the rule. How the engines apply it is tested in
tests/engines/test_token_chooser.py."""

from __future__ import annotations

import pytest

from backend.chat.call_after_results import CALL_AFTER_RESULTS_FROM, CALL_OPENINGS
from backend.testing import ScriptedChatEngine, offline_backend

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ASKED = [{"role": "user", "content": "Weather in Oslo?"}]
CALLED = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        }
    ],
}
AFTER_RESULTS = [*ASKED, CALLED, {"role": "tool", "tool_call_id": "call_1", "content": "11 C"}]


def _first_tokens(profile: str, messages: list[dict], **request) -> list:
    """Each generation's ``SamplingParams.first_token``, for a model that answers."""
    engine = ScriptedChatEngine('{"temperature": "11 C"}', constrains=True)
    body = {"model": "core-1-mini-chat", "messages": messages, "tools": [WEATHER], **request}
    message = offline_backend(engine, profile=profile).chat(body).choices[0].message
    assert message.content == '{"temperature": "11 C"}'
    return [params.first_token for params in engine.params]


def test_after_results_the_default_profile_calls_from_its_share():
    [rule] = _first_tokens("default", AFTER_RESULTS)
    assert rule.share == CALL_AFTER_RESULTS_FROM["default"]
    # One token a character here: the first character of each way a call opens.
    assert rule.tokens == {ord(opening[0]) for opening in CALL_OPENINGS}


@pytest.mark.parametrize(
    ("profile", "messages", "request_extra"),
    [
        ("default", ASKED, {}),  # a first step: the tool-need check decides there
        ("small", AFTER_RESULTS, {}),  # the 0.5B model's share was not measured
        # Answers in JSON: only the tag opens a call, so a brace is no call's opening.
        ("default", AFTER_RESULTS, {"response_format": {"type": "json_object"}}),
    ],
)
def test_elsewhere_the_likeliest_first_token_decides(profile, messages, request_extra):
    assert set(_first_tokens(profile, messages, **request_extra)) == {None}
