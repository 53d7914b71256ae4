"""Calls that wait for the lookup written beside them, offline (``backend.chat.lookup_beside``):
a call giving a code to a tool, beside a call giving that code to a tool named for an id, is
dropped, to be made from what the lookup finds. The engine is scripted by its prompt
(``tests.agent_chain.PromptScriptedEngine``) on the small profile, which has no tool-need
check, so the review's rules are tested alone.
"""

from __future__ import annotations

import json

import pytest

from backend.chat.lookup_beside import waiting_for_lookup
from backend.protocol.schemas import FunctionCall, ToolCall
from backend.testing import offline_backend
from tests.agent_chain import PromptScriptedEngine, call_text

QUESTION = "Who is the manager of employee E-318? Give me their full name."
MANAGER = ("get_manager_id", {"employee_id": "E-318"})
OWN_NAME = ("get_employee_name", {"employee_id": "E-318"})


def _tool(name: str, description: str) -> dict:
    parameters = {
        "type": "object",
        "properties": {"employee_id": {"type": "string"}},
        "required": ["employee_id"],
    }
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOLS = [
    _tool("get_manager_id", "Get the employee id of an employee's manager."),
    _tool("get_employee_name", "Get an employee's full name by employee id."),
    _tool("get_employee_email", "Get the email address of an employee by employee id."),
]


def _call(name: str, arguments: dict) -> ToolCall:
    function = FunctionCall(name=name, arguments=json.dumps(arguments))
    return ToolCall(id="call_x", type="function", function=function)


@pytest.mark.parametrize(
    ("calls", "waiting"),
    [
        ([MANAGER, OWN_NAME], [False, True]),
        ([OWN_NAME, MANAGER], [True, False]),  # in either order
        ([MANAGER, ("get_employee_name", {"employee_id": "e-318 "})], [False, True]),  # written
        ([MANAGER, ("get_employee_name", {"employee_id": "E-245"})], [False, False]),  # another
        # a name and an email of one employee: no lookup beside them
        ([OWN_NAME, ("get_employee_email", {"employee_id": "E-318"})], [False, False]),
        # two lookups of one code: each is the lookup
        ([MANAGER, ("find_employee_id", {"name": "E-318"})], [False, False]),
        # names and numbers are not codes
        (
            [("find_customer_id", {"name": "Mina Park"}), ("get_weather", {"city": "Mina Park"})],
            [False, False],
        ),
        ([("get_order_id", {"n": 7}), ("get_stock", {"count": 7})], [False, False]),
        ([OWN_NAME], [False]),
        ([("get_manager_ids", {"ids": ["E-318"]}), OWN_NAME], [False, True]),  # nested, plural
    ],
)
def test_a_call_waits_for_a_lookup_of_its_code_beside_it(calls, waiting):
    assert waiting_for_lookup([_call(name, arguments) for name, arguments in calls]) == waiting


def _calls_with_answer(*calls: tuple[str, dict]) -> tuple[str | None, list[tuple[str, dict]]]:
    """The reply of an engine that opens a call and writes ``calls``."""

    def script(prompt: str, constrained: bool) -> str:
        return call_text(*calls) if constrained else "<tool_call>\n"

    service = offline_backend(PromptScriptedEngine(script), profile="small")
    body = {"model": "core-1-mini-chat", "tools": TOOLS}
    message = service.chat({**body, "messages": [{"role": "user", "content": QUESTION}]})
    reply = message.choices[0].message
    found = [(c.function.name, json.loads(c.function.arguments)) for c in reply.tool_calls or ()]
    return reply.content, found


def test_the_call_beside_a_lookup_of_its_code_is_dropped_and_the_lookup_made():
    assert _calls_with_answer(MANAGER, OWN_NAME) == (None, [MANAGER])


def test_calls_reading_one_code_without_a_lookup_are_all_made():
    email = ("get_employee_email", {"employee_id": "E-318"})
    assert _calls_with_answer(OWN_NAME, email) == (None, [OWN_NAME, email])
