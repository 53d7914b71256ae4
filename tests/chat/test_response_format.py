"""``response_format``: schemas checked before anything runs, and JSON answers from the real
small model that parse and validate, streamed and not, in-process and through the server."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError

from backend.chat.response_format import JSON_OBJECT, format_constraint
from backend.chat.tool_calls import opens_tool_call
from backend.protocol.errors import BadRequestError
from backend.protocol.schemas import ChatCompletionRequest, ResponseFormat
from tests.chat.test_constrained_calls import WEATHER

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0},
        "city": {"type": "string", "maxLength": 40},
        "languages": {
            "type": "array",
            "items": {"enum": ["norwegian", "english", "korean", "japanese"]},
            "maxItems": 4,
        },
        "employed": {"type": "boolean"},
    },
    "required": ["name", "age", "city", "languages", "employed"],
    "additionalProperties": False,
}
TEXT = "Anna is 31, lives in Oslo, works as a nurse and speaks Norwegian and English."


def _schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}


def _request(response_format: dict, content: str = TEXT, **fields) -> dict:
    return {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": f"Extract the person: {content}"}],
        "temperature": 0,
        "max_tokens": 120,
        "response_format": response_format,
        **fields,
    }


# ---------------------------------------------------------------- offline


def test_text_and_no_format_are_unconstrained():
    assert format_constraint(None) is None
    assert format_constraint(ResponseFormat(type="text")) is None


def test_json_object_is_any_object_but_an_empty_one():
    constraint = format_constraint(ResponseFormat(type="json_object"))
    assert constraint is JSON_OBJECT and not constraint.strict
    xgrammar = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string as accepts

    grammar = xgrammar.Grammar.from_json_schema(constraint.schema_json, strict_mode=False)
    assert accepts(grammar, '{"setup": "Why?", "n": [1, {}]}')
    assert not accepts(grammar, "{}")
    assert not accepts(grammar, "[1]")


def test_object_sizes_are_enforced_keywords():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "minProperties": 1,
        "maxProperties": 1,
    }
    constraint = format_constraint(ResponseFormat.model_validate(_schema_format(schema)))
    assert constraint.schema == schema


def test_a_schema_is_kept_as_sent_and_strict():
    constraint = format_constraint(ResponseFormat.model_validate(_schema_format(PERSON)))
    assert constraint.schema == PERSON and constraint.strict


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        ({"not": {"type": "string"}}, "'not' (at #)"),
        (
            {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}},
            "'multipleOf' (at #/properties/n)",
        ),
        ({"type": "array", "items": {"uniqueItems": True}}, "'uniqueItems' (at #/items)"),
        ({"anyOf": [{"type": "string"}, {"if": {}}]}, "'if' (at #/anyOf/1)"),
    ],
)
def test_keywords_the_grammar_cannot_enforce_are_refused_by_name(schema, named):
    with pytest.raises(BadRequestError) as refused:
        format_constraint(ResponseFormat.model_validate(_schema_format(schema)))
    assert named in refused.value.message and refused.value.param == "response_format"


def test_property_names_are_not_taken_for_keywords():
    schema = {"type": "object", "properties": {"not": {"type": "string"}, "if": {}}}
    assert format_constraint(ResponseFormat.model_validate(_schema_format(schema))) is not None


def test_a_schema_the_compiler_rejects_is_a_400_with_its_reason():
    schema = {"type": "string", "pattern": "(?<=a)b"}
    with pytest.raises(BadRequestError, match="Lookbehind is not supported"):
        format_constraint(ResponseFormat.model_validate(_schema_format(schema)))


def test_json_schema_needs_its_schema_and_the_wire_name_is_schema():
    with pytest.raises(ValidationError):
        ResponseFormat(type="json_schema")
    request = ChatCompletionRequest.model_validate(_request(_schema_format(PERSON)))
    sent = request.model_dump(mode="json", exclude_none=True)
    assert sent["response_format"]["json_schema"]["schema"] == PERSON


def test_only_the_tag_opens_a_call_when_answers_are_json():
    assert opens_tool_call('{"name": "Anna"', json_answers=True) is False
    assert opens_tool_call("<tool_call>", json_answers=True) is True
    assert opens_tool_call('{"name": "get_weather"') is True


# ---------------------------------------------------------------- the small model


@pytest.mark.model
def test_json_schema_answers_validate_streamed_and_not(small_backend):
    request = _request(_schema_format(PERSON))
    answer = small_backend.chat(request)
    content = answer.choices[0].message.content
    person = json.loads(content)
    jsonschema.validate(person, PERSON)
    assert person["age"] == 31 and "Oslo" in person["city"]
    # Laid out as the model writes JSON unasked: a member per line, two spaces per level.
    assert content == json.dumps(person, indent=2, ensure_ascii=False)
    streamed = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in small_backend.stream_chat(request)
        if chunk.choices
    )
    assert streamed == content


@pytest.mark.model
def test_json_object_answers_are_objects(small_backend):
    for content in (TEXT, "민수는 42살이고 부산에 살아요.", "ケンは東京に住む29歳です。"):
        answer = small_backend.chat(_request({"type": "json_object"}, content))
        assert isinstance(json.loads(answer.choices[0].message.content), dict)


@pytest.mark.model
def test_with_tools_the_model_calls_or_answers_in_the_format(small_backend):
    answer = small_backend.chat(_request(_schema_format(PERSON), tools=[WEATHER]))
    message = answer.choices[0].message
    if message.tool_calls:
        assert message.tool_calls[0].function.name == "get_weather"
    else:
        jsonschema.validate(json.loads(message.content), PERSON)


class Person(BaseModel):
    name: str
    age: int
    city: str


@pytest.mark.model
def test_the_openai_sdk_parses_into_a_pydantic_model(real_server):
    openai = pytest.importorskip("openai")
    with openai.OpenAI(
        base_url=f"{real_server.url}/v1/core", api_key=real_server.api_key, max_retries=0
    ) as client:
        completion = client.chat.completions.parse(
            model="core-1-mini-chat",
            messages=[{"role": "user", "content": f"Extract the person: {TEXT}"}],
            response_format=Person,
            temperature=0,
            max_tokens=80,
        )
    person = completion.choices[0].message.parsed
    assert isinstance(person, Person) and person.age == 31


@pytest.mark.model
def test_an_unenforceable_schema_is_a_400_over_http(real_server):
    import httpx

    body = _request(_schema_format({"type": "object", "not": {"required": ["a"]}}))
    reply = httpx.post(
        f"{real_server.url}/v1/core/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {real_server.api_key}"},
        timeout=60,
    )
    assert reply.status_code == 400 and "'not' (at #)" in reply.json()["error"]["message"]
