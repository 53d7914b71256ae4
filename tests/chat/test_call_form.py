"""The form of a call read from a free answer's opening (``backend.chat.call_form``): pure
text, offline."""

import pytest

from backend.chat.call_form import CallForm, call_form, call_in_form
from backend.chat.prompt import Generation
from backend.engines.base import JSONSchemaConstraint
from backend.testing.engines import CharTokenizer


@pytest.mark.parametrize(
    ("opening", "form"),
    [
        ('```json\n[\n    {\n        "name"', CallForm("```json\n", 4)),
        ('```json\n[\n  {\n    "name": "find', CallForm("```json\n", 2)),
        ('```json\n[\n    {"name"', CallForm("```json\n", 4)),
        ('```\n{\n  "name"', CallForm("```\n", 2)),
        ('```json\n[{"name"', CallForm("```json\n", None)),
        ('<tool_call>\n{"name"', CallForm("<tool_call>\n", None)),
        ('\n[{"name": "get', CallForm("", None)),
        ('{"name"', CallForm("", None)),
    ],
)
def test_the_form_is_what_comes_before_the_json_and_the_indent_of_its_first_line(opening, form):
    assert call_form(opening) == form


@pytest.mark.parametrize("opening", ["```json\n", "<tool_call>", ""])
def test_no_form_before_the_json_begins(opening):
    assert call_form(opening) is None


def test_the_call_continues_the_answer_prompt_with_the_opening_and_keeps_its_schema():
    tokenizer = CharTokenizer()
    schema = JSONSchemaConstraint('{"type": "array"}', items=16)
    call = Generation([9, 9], "<tool_call>\n", frozenset({"f"}), schema, parallel_calls=True)
    answer_ids = tokenizer.encode("prompt")
    in_form = call_in_form(tokenizer, answer_ids, call, CallForm("```json\n", 4))
    assert in_form.ids == answer_ids + tokenizer.encode("```json\n")
    assert in_form.prefill == "```json\n"
    assert in_form.constraint == JSONSchemaConstraint('{"type": "array"}', indent=4, items=16)
    assert (in_form.tool_names, in_form.parallel_calls) == (call.tool_names, True)
