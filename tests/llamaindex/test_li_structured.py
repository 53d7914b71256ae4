"""LlamaIndex structured outputs on the real small model, in-process and over HTTP:
``structured_predict`` (sync, async, streamed) and ``as_structured_llm`` return validated
objects (through a forced tool call, LlamaIndex's way for function-calling LLMs)."""

from __future__ import annotations

import pytest
from llama_index.core.prompts import PromptTemplate
from pydantic import BaseModel

from llamaindex_core_ext import Core
from tests.llamaindex.conftest import HTTP_TEST_KEY

pytestmark = pytest.mark.model

EXTRACT = PromptTemplate("Extract the person: {text}")


class Person(BaseModel):
    name: str
    age: int
    city: str


@pytest.fixture(params=["in-process", "http"])
def llm(request, small_backend):
    if request.param == "in-process":
        return Core(backend=small_backend, temperature=0)
    base_url = request.getfixturevalue("http_base_url")
    return Core(base_url=base_url, api_key=HTTP_TEST_KEY, temperature=0)


async def test_structured_predict_returns_validated_objects(llm):
    anna = llm.structured_predict(Person, EXTRACT, text="Anna is 31 and lives in Oslo.")
    assert anna == Person(name="Anna", age=31, city="Oslo")
    minsu = await llm.astructured_predict(Person, EXTRACT, text="Minsu is 42 and lives in Busan.")
    assert isinstance(minsu, Person) and minsu.age == 42
    parts = list(llm.stream_structured_predict(Person, EXTRACT, text="Ken is 29, from Tokyo."))
    assert parts and isinstance(parts[-1], Person) and parts[-1].age == 29


def test_as_structured_llm_answers_with_the_object(llm):
    reply = llm.as_structured_llm(Person).complete("Extract the person: Mia is 35, lives in Rome.")
    assert isinstance(reply.raw, Person) and reply.raw.age == 35
