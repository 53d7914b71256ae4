"""Made-up numbers, the tool that gives a made-up value, and values written without the
conversation's spaces, offline (issue 50).

A number given to a required parameter where the conversation states no number at all is
shown to the model as made up, and the call it makes then is kept as it is unless it makes
the number up again beside another call (it then waits for that call). After tool results,
a number none of the conversation's numbers states is made up too, where all of them can be
read, and so it is on a first step whose only numbers are the digits of codes (``C-6090``).
The model, told of a made-up value, is told which offered tool's description names it and
calls one of them; a value the conversation holds only with spaces the model left out is
written with them. The engine is scripted by its prompt
(``tests.agent_chain.PromptScriptedEngine``) on the small profile, which has no tool-need
check, so the review's rules are tested alone.
"""

from __future__ import annotations

import json

import pytest

from backend.chat.made_up_arguments import (
    UNFOUNDED_RESULT,
    respaced_arguments,
    tools_giving,
    unfounded_arguments,
)
from backend.chat.stated_numbers import states_a_number, states_a_quantity
from backend.protocol.schemas import FunctionCall, ToolDefinition
from backend.testing import offline_backend
from tests.agent_chain import PromptScriptedEngine, call_text


def _tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    parameters = {"type": "object", "properties": properties, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


NUMBER = {"type": "number"}
TEXT = {"type": "string"}
TOOLS = [
    _tool(
        "get_weather", "Get the current weather in a city, in Celsius.", {"city": TEXT}, ["city"]
    ),
    _tool(
        "convert_units",
        "Convert a value between units.",
        {"value": NUMBER, "from_unit": TEXT, "to_unit": TEXT, "digits": NUMBER},
        ["value", "from_unit", "to_unit"],
    ),
    _tool(
        "get_order",
        "Get the product id and the shipping warehouse of an order by order id.",
        {"order_id": TEXT},
        ["order_id"],
    ),
    _tool(
        "get_stock",
        "Get the number of units of a product in stock at a warehouse.",
        {"product_id": TEXT, "warehouse": TEXT},
        ["product_id", "warehouse"],
    ),
]
DEFINITIONS = [ToolDefinition.model_validate(tool) for tool in TOOLS]
QUESTION = "What is the temperature in Seoul in Fahrenheit?"
CONVERT_25 = ("convert_units", {"value": 25, "from_unit": "celsius", "to_unit": "fahrenheit"})
WEATHER = ("get_weather", {"city": "Seoul"})


@pytest.mark.parametrize(
    "text",
    [
        "Convert 25 degrees",
        "5万円をドルに",
        "三つのリンゴ",
        "Set a timer for twenty minutes",
        "a dozen eggs",
        "사과 다섯 개",
        "りんごをふたつ",
    ],
)
def test_numbers_in_digits_numerals_and_words_are_stated(text):
    assert states_a_number(text)


@pytest.mark.parametrize(
    "text",
    [
        QUESTION,
        "고객 Amara Okafor의 잔액을 원화로 바꾸면 얼마인가요?",
        "東京の天気を教えてください。",
    ],
)
def test_a_question_without_any_number_states_none(text):
    assert not states_a_number(text)


def _numbers(arguments: dict, said: str = QUESTION, name: str = "convert_units", **kwargs):
    call = FunctionCall(name=name, arguments=json.dumps(arguments))
    return unfounded_arguments(call, DEFINITIONS, said.casefold(), **kwargs).values


def test_a_required_number_in_a_conversation_stating_none_is_made_up():
    assert _numbers(CONVERT_25[1]) == ["25"]
    assert _numbers({**CONVERT_25[1], "value": 77.5}) == ["77.5"]


def test_numbers_the_conversation_could_give_are_kept():
    assert _numbers(CONVERT_25[1], said="Convert 25 degrees to fahrenheit") == []
    assert _numbers(CONVERT_25[1], said="Seoul: 18 °C, cloudy") == []  # another number said
    assert _numbers({**CONVERT_25[1], "value": 1}) == []  # "a" in words
    assert _numbers({**CONVERT_25[1], "value": 0}) == []
    assert _numbers(CONVERT_25[1], numbers=False) == []  # the call made after being told


@pytest.mark.parametrize(
    "text",
    [
        "What is the balance of customer C-6090 in yen?",
        "고객 c-4821의 잔액은 엔화로 얼마인가요?",
        "注文 O-1003 の出荷倉庫がある都市の気温は華氏で何度ですか？",
        "Is train KTX117 on time?",
    ],
)
def test_the_digits_of_codes_state_no_quantity(text):
    assert states_a_number(text) and not states_a_quantity(text)


@pytest.mark.parametrize(
    "text",
    ["Order O-1003: 3 units", "Convert 5km for C-6090", "C-6090 의 잔액 50만 원", "two of P-77"],
)
def test_a_number_beside_codes_is_a_quantity(text):
    assert states_a_quantity(text)


def test_a_number_where_the_only_numbers_are_codes_digits_is_made_up():
    said = "What is the temperature in Fahrenheit where order O-1003 ships from?"
    assert _numbers(CONVERT_25[1], said=said) == ["25"]
    # the code's own digits are stated: a call may take them
    assert _numbers({**CONVERT_25[1], "value": 1003}, said=said) == []


AFTER_WEATHER = f"{QUESTION}\n{json.dumps(WEATHER[1])}\nSeoul: 18 °C, light rain"


def test_after_results_a_number_stated_nowhere_is_made_up():
    assert _numbers(CONVERT_25[1], said=AFTER_WEATHER, after_results=True) == ["25"]
    # the same conversation's numbers, before results, may be turned into others
    assert _numbers(CONVERT_25[1], said=AFTER_WEATHER) == []


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (18, AFTER_WEATHER),
        (1250, "balance of C-4821: 1,250.00 USD"),
        (3420.8, "balance of C-5512: 3,420.75 USD"),  # rounded to a tenth
        (3421, "balance of C-5512: 3,420.75 USD"),  # to a whole
        (0.05, "the rate is 5% a year"),  # a percentage
        (-3, "Oslo: -3 °C, snow"),  # a sign
        (25, "Seoul: twenty-five degrees"),  # a number word not read
        (25, "잔액은 50만 원입니다"),  # a Korean number not read
    ],
)
def test_after_results_a_number_stated_or_unreadable_is_kept(value, said):
    assert _numbers({**CONVERT_25[1], "value": value}, said=said, after_results=True) == []


def test_after_results_a_made_up_number_is_told_and_the_stated_one_is_called():
    convert_18 = ("convert_units", {**CONVERT_25[1], "value": 18})

    def script(prompt: str, constrained: bool) -> str:
        if not constrained:
            return "<tool_call>\n"
        return call_text(
            convert_18 if UNFOUNDED_RESULT.format(values="25") in prompt else CONVERT_25
        )

    engine = PromptScriptedEngine(script)
    service = offline_backend(engine, profile="small")
    called = {"id": "call_1", "type": "function"}
    called["function"] = {"name": WEATHER[0], "arguments": json.dumps(WEATHER[1])}
    messages = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [called]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Seoul: 18 °C, light rain"},
    ]
    body = {"model": "core-1-mini-chat", "tools": TOOLS, "messages": messages}
    calls = service.chat(body).choices[0].message.tool_calls or ()
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [convert_18]


def test_an_optional_number_and_a_number_the_definition_shows_are_kept():
    assert _numbers({"value": 1, "from_unit": "c", "to_unit": "f", "digits": 2}) == []
    described = [_tool("set_timer", "A timer (5 minutes if unsure).", {"m": NUMBER}, ["m"])]
    call = FunctionCall(name="set_timer", arguments='{"m": 5}')
    tools = [ToolDefinition.model_validate(tool) for tool in described]
    assert unfounded_arguments(call, tools, "set a timer").values == []


def test_the_tool_whose_description_names_a_parameter_gives_it():
    assert tools_giving("product_id", DEFINITIONS, "get_stock") == ["get_order"]
    assert tools_giving("productId", DEFINITIONS, "get_stock") == ["get_order"]
    # a tool taking the parameter itself does not give it; one word names nothing
    assert tools_giving("order_id", DEFINITIONS, "get_stock") == []
    assert tools_giving("value", DEFINITIONS, "convert_units") == []
    possessive = [ToolDefinition.model_validate(_tool("find", "A customer's id by name.", {}, []))]
    assert tools_giving("customer_id", possessive, "get_balance") == ["find"]


def test_a_made_up_value_s_error_names_the_tool_that_gives_it():
    call = FunctionCall(name="get_stock", arguments='{"product_id": "P-1004", "warehouse": "X"}')
    found = unfounded_arguments(call, DEFINITIONS, "units of the product in order o-1004?")
    assert found.values == ["P-1004"]
    assert found.result(DEFINITIONS, "get_stock") == (
        f"{UNFOUNDED_RESULT.format(values='P-1004')} get_order gives the product id."
    )
    assert found.result() == UNFOUNDED_RESULT.format(values="P-1004")


def _made_up_then(*retried: tuple[str, dict]) -> PromptScriptedEngine:
    """Calls ``CONVERT_25``; told that 25 is made up, calls ``retried``."""

    def script(prompt: str, constrained: bool) -> str:
        if not constrained:
            return "<tool_call>\n"
        if UNFOUNDED_RESULT.format(values="25") in prompt:
            return call_text(*retried)
        return call_text(CONVERT_25)

    return PromptScriptedEngine(script)


def _calls(engine: PromptScriptedEngine) -> list[tuple[str, dict]]:
    service = offline_backend(engine, profile="small")
    body = {"model": "core-1-mini-chat", "tools": TOOLS}
    message = service.chat({**body, "messages": [{"role": "user", "content": QUESTION}]})
    calls = message.choices[0].message.tool_calls or ()
    return [(c.function.name, json.loads(c.function.arguments)) for c in calls]


def test_a_made_up_number_is_told_and_the_call_made_then_is_kept():
    engine = _made_up_then(WEATHER)
    assert _calls(engine) == [WEATHER]
    assert len(engine.prompts) == 3  # the free opening, the call, the call after being told


def test_a_number_made_up_again_after_being_told_is_kept():
    engine = _made_up_then(CONVERT_25)
    assert _calls(engine) == [CONVERT_25]
    assert len(engine.prompts) == 3


def test_a_number_made_up_again_beside_a_call_it_could_make_waits_for_that_call():
    for retried in [(WEATHER, CONVERT_25), (CONVERT_25, WEATHER)]:
        engine = _made_up_then(*retried)
        assert _calls(engine) == [WEATHER]
        assert len(engine.prompts) == 3


def test_the_call_after_a_made_up_value_is_held_to_the_tools_that_give_it():
    made_up = ("get_stock", {"product_id": "P-1004", "warehouse": "Busan"})
    lookup = ("get_order", {"order_id": "O-1004"})

    def script(prompt: str, constrained: bool) -> str:
        if not constrained:
            return "<tool_call>\n"
        return call_text(lookup if "get_order gives the product id." in prompt else made_up)

    engine = PromptScriptedEngine(script)
    service = offline_backend(engine, profile="small")
    question = "How many units of the product in order O-1004 are in stock?"
    body = {"model": "core-1-mini-chat", "tools": TOOLS}
    message = service.chat({**body, "messages": [{"role": "user", "content": question}]})
    calls = message.choices[0].message.tool_calls or ()
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [lookup]
    first, retry = (c.schema_json for c in engine.constraints[1:])
    assert '"get_stock"' in first and '"get_order"' in first
    assert '"get_order"' in retry and '"get_stock"' not in retry


def test_a_made_up_value_no_tool_gives_leaves_the_call_after_it_free():
    engine = _made_up_then(WEATHER)
    _calls(engine)
    assert '"get_stock"' in engine.constraints[2].schema_json  # every tool, as before


def _respaced(arguments: dict, said: str) -> dict:
    call = FunctionCall(name="f", arguments=json.dumps(arguments, ensure_ascii=False))
    return json.loads(respaced_arguments(call, said).arguments)


def test_a_value_written_without_the_conversation_s_spaces_gets_them_back():
    said = "Mina Park 직원의 이메일 주소를 알려주세요."
    assert _respaced({"name": "MinaPark"}, said) == {"name": "Mina Park"}
    assert _respaced({"name": "minapark", "n": 2}, said) == {"name": "Mina Park", "n": 2}


def test_values_the_conversation_holds_or_could_not_hold_are_left_alone():
    said = "Mina Park asked about New York and the MinaPark account."
    for value in ("MinaPark", "Kenji Sato", "NYC", "Yokohama", "New  York"):
        assert _respaced({"name": value}, said) == {"name": value}
    call = FunctionCall(name="f", arguments="not json")
    assert respaced_arguments(call, said) is call


def test_a_respaced_call_is_the_one_returned():
    lookup = ("find_employee_id", {"name": "MinaPark"})
    tools = [_tool("find_employee_id", "Find an employee's id.", {"name": TEXT}, ["name"])]

    def script(prompt: str, constrained: bool) -> str:
        return call_text(lookup) if constrained else "<tool_call>\n"

    service = offline_backend(PromptScriptedEngine(script), profile="small")
    question = "Mina Park 직원의 이메일 주소를 알려주세요."
    body = {"model": "core-1-mini-chat", "tools": tools}
    message = service.chat({**body, "messages": [{"role": "user", "content": question}]})
    (call,) = message.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"name": "Mina Park"}
