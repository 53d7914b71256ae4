"""Every validation rule and message of spec sections 4, 7 and 8, through the backend.

The backend runs on small offline engines here, so the rules are checked exactly as a
caller meets them (the same checks run before any real model work).
"""

import pytest

from backend.backends.local import InProcessBackend
from backend.protocol.errors import BadRequestError, NotFoundError
from backend.protocol.schemas import ChatCompletionRequest
from backend.protocol.validation import parse_request
from backend.testing import CharCountEmbeddingEngine, ScriptedChatEngine

GROUNDEDNESS = "core-1-mini-groundedness-check"


@pytest.fixture
def service():
    return InProcessBackend(
        profile="small",
        chat_engine_instance=ScriptedChatEngine("yes"),
        embedding_engine_instance=CharCountEmbeddingEngine(),
    )


def _message(service, method, body):
    with pytest.raises(BadRequestError) as caught:
        getattr(service, method)(body)
    err = caught.value
    assert err.status_code == 400
    payload = err.body.model_dump()["error"]
    assert payload["type"] == "invalid_request_error"
    return payload["message"]


def _check(messages, **extra):
    return {"model": GROUNDEDNESS, "messages": messages, **extra}


USER = {"role": "user", "content": "The sky is blue."}
ASSISTANT = {"role": "assistant", "content": "The sky is blue."}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([ASSISTANT], "invalid request: 1 user message expected, found 0"),
        ([USER, USER, ASSISTANT], "invalid request: 1 user message expected, found 2"),
        ([USER], "invalid request: 1 assistant message expected, found 0"),
        ([USER, ASSISTANT, ASSISTANT], "invalid request: 1 assistant message expected, found 2"),
        ([], "invalid request: 1 user message expected, found 0"),
        (
            [{"role": "user", "content": ""}, ASSISTANT],
            "invalid request: user message content is required",
        ),
        ([{"role": "user"}, ASSISTANT], "invalid request: user message content is required"),
        (
            [USER, {"role": "assistant", "content": ""}],
            "invalid request: assistant message content is required",
        ),
        (
            [USER, {"role": "assistant", "content": None}],
            "invalid request: assistant message content is required",
        ),
    ],
)
def test_groundedness_rules_use_the_spec_messages(service, messages, expected):
    assert _message(service, "chat", _check(messages)) == expected


def test_groundedness_error_object_has_null_param_and_code(service):
    with pytest.raises(BadRequestError) as caught:
        service.chat(_check([USER]))
    assert caught.value.body.model_dump() == {
        "error": {
            "message": "invalid request: 1 assistant message expected, found 0",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def test_groundedness_rejects_other_roles(service):
    message = _message(
        service, "chat", _check([{"role": "system", "content": "x"}, USER, ASSISTANT])
    )
    assert "exactly one user message" in message and "system" in message


def test_groundedness_answers_one_of_the_three_verdicts_with_versioned_model(service):
    result = service.chat(_check([USER, ASSISTANT]))
    assert result.model == "core-1-mini-groundedness-check-240502"
    assert result.choices[0].message.content == "grounded"  # the scripted engine says "yes"


@pytest.mark.parametrize("temperature", [-0.1, 2.5])
def test_temperature_outside_0_to_2_is_rejected(service, temperature):
    for body in (
        {"model": "core-1-mini-chat", "messages": [USER], "temperature": temperature},
        _check([USER, ASSISTANT], temperature=temperature),
    ):
        assert f"temperature must be between 0 and 2, got {temperature}" in _message(
            service, "chat", body
        )


@pytest.mark.parametrize("temperature", [0, 2])
def test_temperature_bounds_are_accepted(service, temperature):
    service.chat({"model": "core-1-mini-chat", "messages": [USER], "temperature": temperature})


def test_input_plus_max_tokens_must_fit_the_context(service):
    ok = {"model": "core-1-mini-chat", "messages": [USER], "max_tokens": 32768}
    message = _message(service, "chat", ok)
    assert "exceed the model's context length of" in message and "lower max_tokens" in message


@pytest.mark.parametrize("max_tokens", [0, -5])
def test_max_tokens_must_be_positive(service, max_tokens):
    body = {"model": "core-1-mini-chat", "messages": [USER], "max_tokens": max_tokens}
    assert "max_tokens must be at least 1" in _message(service, "chat", body)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "tool", "content": "42"}, "a tool message needs tool_call_id"),
        ({"role": "wizard", "content": "hi"}, "messages[0].role"),
        ({"role": "user"}, "user message content is required"),
        (
            {
                "role": "assistant",
                "content": "text",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            "content must be null when tool_calls is set",
        ),
    ],
)
def test_role_rules_of_section_2_2(service, message, expected):
    body = {"model": "core-1-mini-chat", "messages": [message]}
    assert expected in _message(service, "chat", body)


def _call(call_id):
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_tool_message_must_answer_an_earlier_call(service):
    body = {
        "model": "core-1-mini-chat",
        "messages": [USER, {"role": "tool", "tool_call_id": "nope", "content": "1"}],
    }
    assert "no earlier assistant message called" in _message(service, "chat", body)


def test_duplicate_tool_call_ids_are_rejected(service):
    body = {
        "model": "core-1-mini-chat",
        "messages": [
            USER,
            {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("a")]},
        ],
    }
    assert "duplicate tool call id 'a'" in _message(service, "chat", body)


def test_empty_string_content_beside_tool_calls_counts_as_null(service):
    def body(content):
        return {
            "model": "core-1-mini-chat",
            "messages": [
                USER,
                {"role": "assistant", "content": content, "tool_calls": [_call("a")]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
            ],
        }

    parsed = parse_request(ChatCompletionRequest, body(""))
    assert parsed.messages[1].content is None
    # accepted, and the model reads exactly the prompt of the request with null content
    assert service.count_prompt_tokens(body("")) == service.count_prompt_tokens(body(None))
    assert service.chat(body("")).choices[0].message.content == "yes"
    assert "content must be null" in _message(service, "chat", body("x"))


def test_forced_tool_must_be_among_tools(service):
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    body = {
        "model": "core-1-mini-chat",
        "messages": [USER],
        "tools": [tool],
        "tool_choice": {"type": "function", "function": {"name": "g"}},
    }
    assert "not among tools" in _message(service, "chat", body)
    body.pop("tools")
    assert "tool_choice needs tools" in _message(service, "chat", body)


def test_unknown_fields_are_ignored_and_n_above_one_is_rejected(service):
    body = {"model": "core-1-mini-chat", "messages": [USER], "user": "u1", "presence_penalty": 0.5}
    assert service.chat(body).choices[0].message.content == "yes"
    assert "n must be 1" in _message(service, "chat", {**body, "n": 2})


def test_unknown_model_is_404_and_wrong_operation_400(service):
    with pytest.raises(NotFoundError):
        service.chat({"model": "nope", "messages": [USER]})
    assert "core-embedding-1-large-passage" in _message(
        service, "embed", {"model": "core-1-mini-chat", "input": "x"}
    )


# ------------------------------------------------------------------ embeddings (section 8)

PASSAGE = "core-embedding-1-large-passage"


def test_at_most_100_strings(service):
    service.embed({"model": PASSAGE, "input": ["a"] * 100})
    assert "input holds 101 strings; at most 100" in _message(
        service, "embed", {"model": PASSAGE, "input": ["a"] * 101}
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", "input is empty"), (["a", ""], "input[1] is empty"), ([], "at least one string")],
)
def test_no_empty_strings_and_no_empty_list(service, value, expected):
    assert expected in _message(service, "embed", {"model": PASSAGE, "input": value})


def test_at_most_4000_tokens_per_string(service):
    prefix = len("passage: ") + 2  # the fake tokenizer counts characters, plus <s> and </s>
    service.embed({"model": PASSAGE, "input": "a" * (4000 - prefix)})
    message = _message(service, "embed", {"model": PASSAGE, "input": ["b", "a" * (4001 - prefix)]})
    assert "input[1] has 4001 tokens; at most 4000" in message


def test_total_tokens_under_204800(service):
    per_text = 3999 - len("passage: ") - 2  # 3999 tokens each
    texts = ["a" * per_text] * 52  # 207,948 tokens
    message = _message(service, "embed", {"model": PASSAGE, "input": texts})
    assert "207948 tokens in total" in message and "under 204800 tokens" in message


def test_dimensions_other_than_the_models_own_are_rejected(service):
    assert "26-dimensional" in _message(
        service, "embed", {"model": PASSAGE, "input": "a", "dimensions": 4096}
    )
    assert service.embed({"model": PASSAGE, "input": "a", "dimensions": 26}).data


def test_deprecated_models_warn_and_report_the_serving_model(service):
    with pytest.warns(DeprecationWarning, match="core-embedding-1-large-query"):
        result = service.embed({"model": "core-1-mini-embedding-query", "input": "abc"})
    assert result.model == "core-embedding-1-large-query"


def test_malformed_bodies_name_the_field(service):
    assert "messages" in _message(service, "chat", {"model": "core-1-mini-chat"})
    assert "body must be a JSON object" in _message(service, "chat", ["not", "a", "dict"])
    assert "input" in _message(service, "embed", {"model": PASSAGE, "input": 5})
