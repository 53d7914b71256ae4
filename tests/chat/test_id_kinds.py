"""An id of another kind than a tool's parameter asks for, and an id given to the tool that
finds ids of its kind, offline (issue 50).

Asked for the stock of the product in order O-1004, the model gave the order id as the
``product_id``. Where an offered tool turns an order id into a product id, the call is shown
to the model as failed, naming that tool, and the call it makes then is held to it. Given a
customer id as the name to look up (``find_customer_id("C-5512")``), the model is told it is
an id already, to be given to a tool that takes one. The engine is scripted by its prompt
(``tests.agent_chain.PromptScriptedEngine``) on the small profile, which has no tool-need
check, so the review's rules are tested alone.
"""

from __future__ import annotations

import json

import pytest

from backend.chat.made_up_arguments import unfounded_arguments
from backend.chat.parameter_kinds import kind_given, kind_looked_up
from backend.protocol.schemas import FunctionCall, ToolDefinition
from backend.testing import offline_backend
from tests.agent_chain import PromptScriptedEngine, call_text
from tests.chat.test_made_up_values import DEFINITIONS, TEXT, TOOLS, _tool

QUESTION = "How many units of the product in order O-1004 are in stock in Busan?"
GIVEN_AS_PRODUCT = ("get_stock", {"product_id": "O-1004", "warehouse": "Busan"})
LOOKUP = ("get_order", {"order_id": "O-1004"})
TOLD = (
    "error: O-1004 is an order id, not a product id. First find the product id with another "
    "tool. get_order gives the product id."
)


@pytest.mark.parametrize("value", ["O-1004", "o-1004", "ord_42", "O1004", " O-1004"])
def test_an_order_id_given_as_a_product_id_is_of_another_kind(value):
    assert kind_given("product_id", value, DEFINITIONS, "get_stock") == "order id"
    assert kind_given("productId", value, DEFINITIONS, "get_stock") == "order id"


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("product_id", "P-77"),  # the letters begin the kind asked for
        ("product_id", "prod_77"),
        ("product_id", "1004"),  # no letters
        ("product_id", "X-1004"),  # letters of no tool's kind
        ("warehouse", "O-1004"),  # not an identifier
        ("order_id", "P-77"),  # no offered tool gives an order id
    ],
)
def test_ids_of_the_kind_asked_for_or_of_no_known_kind_are_left_alone(parameter, value):
    assert kind_given(parameter, value, DEFINITIONS, "get_stock") is None


def test_an_id_of_a_kind_no_tool_turns_into_the_one_asked_for_is_left_alone():
    tools = [
        _tool("get_user", "Get a user's name by user id.", {"user_id": TEXT}, ["user_id"]),
        _tool("get_documents", "Documents of an owner.", {"owner_id": TEXT}, ["owner_id"]),
    ]
    definitions = [ToolDefinition.model_validate(tool) for tool in tools]
    assert kind_given("owner_id", "U-5", definitions, "get_documents") is None
    without_lookup = [d for d in DEFINITIONS if d.function.name != "get_order"]
    assert kind_given("product_id", "O-1004", without_lookup, "get_stock") is None


def test_the_model_is_told_the_kind_and_the_tool_that_gives_the_one_asked_for():
    call = FunctionCall(name="get_stock", arguments=json.dumps(GIVEN_AS_PRODUCT[1]))
    found = unfounded_arguments(call, DEFINITIONS, QUESTION.casefold())
    assert found.other_kinds == [("O-1004", "order id", "product id")]
    assert not found.values and not found.names
    assert found.result(DEFINITIONS, "get_stock") == TOLD
    kept = FunctionCall(name="get_stock", arguments='{"product_id": "P-77", "warehouse": "B"}')
    assert not unfounded_arguments(kept, DEFINITIONS, "units of P-77 in B?")


def _told_then(told: str, first: tuple, then: tuple, tools: list, question: str):
    """The calls a model scripted to call ``first``, and ``then`` once shown ``told``, makes
    for ``question``; and its engine."""

    def script(prompt: str, constrained: bool) -> str:
        if not constrained:
            return "<tool_call>\n"
        return call_text(then if told in prompt else first)

    engine = PromptScriptedEngine(script)
    service = offline_backend(engine, profile="small")
    body = {"model": "core-1-mini-chat", "tools": tools}
    message = service.chat({**body, "messages": [{"role": "user", "content": question}]})
    calls = message.choices[0].message.tool_calls or ()
    return [(c.function.name, json.loads(c.function.arguments)) for c in calls], engine


def test_told_of_an_order_id_as_a_product_id_the_model_looks_the_order_up():
    calls, engine = _told_then(TOLD, GIVEN_AS_PRODUCT, LOOKUP, TOOLS, QUESTION)
    assert calls == [LOOKUP]
    first, retry = (c.schema_json for c in engine.constraints[1:])
    assert '"get_stock"' in first
    assert '"get_order"' in retry and '"get_stock"' not in retry


CUSTOMER_TOOLS = [
    _tool("find_customer_id", "Find a customer's id by their full name.", {"name": TEXT}, ["name"]),
    _tool(
        "get_account_balance",
        "Get the account balance in USD of a customer by id.",
        {"customer_id": TEXT},
        ["customer_id"],
    ),
    *TOOLS,
]
CUSTOMER_DEFINITIONS = [ToolDefinition.model_validate(tool) for tool in CUSTOMER_TOOLS]
BALANCE_QUESTION = "What is the account balance of customer C-5512?"
LOOKED_UP = ("find_customer_id", {"name": "C-5512"})
BALANCE = ("get_account_balance", {"customer_id": "C-5512"})
TOLD_LOOKED_UP = (
    "error: C-5512 is already a customer id, not a name to look up. Give it to a tool that "
    "takes a customer id."
)


@pytest.mark.parametrize("value", ["C-5512", "c-5512", "cust_5512", " C5512"])
def test_an_id_given_to_the_tool_that_finds_ids_of_its_kind_is_looked_up(value):
    assert kind_looked_up(value, CUSTOMER_DEFINITIONS, "find_customer_id") == "customer id"


@pytest.mark.parametrize(
    ("called", "value"),
    [
        ("find_customer_id", "Mina Park"),  # a name
        ("find_customer_id", "O-1004"),  # letters of another kind than the tool finds
        ("find_customer_id", "5512"),  # no letters
        ("get_weather", "C-5512"),  # a tool that finds no id
        ("get_account_balance", "C-5512"),  # the tool that takes the id
    ],
)
def test_values_the_tool_can_look_up_are_left_alone(called, value):
    assert kind_looked_up(value, CUSTOMER_DEFINITIONS, called) is None


def test_the_model_is_told_the_id_needs_no_lookup():
    call = FunctionCall(name="find_customer_id", arguments=json.dumps(LOOKED_UP[1]))
    found = unfounded_arguments(call, CUSTOMER_DEFINITIONS, BALANCE_QUESTION.casefold())
    assert found.looked_up == [("C-5512", "customer id", "name")]
    assert not found.values and not found.names and not found.other_kinds
    assert found.result(CUSTOMER_DEFINITIONS, "find_customer_id") == TOLD_LOOKED_UP


def test_told_an_id_needs_no_lookup_the_model_gives_it_to_the_tool_that_takes_it():
    calls, _ = _told_then(TOLD_LOOKED_UP, LOOKED_UP, BALANCE, CUSTOMER_TOOLS, BALANCE_QUESTION)
    assert calls == [BALANCE]
