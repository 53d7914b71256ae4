"""What ``backend.chat.corrected_calls`` was chosen on: a failed call the model repeated,
shown failing with its result and made again.

* ``cases``: eight lookups of our own, outside the task sets, that failed with a hint of
  the values' format (``ke 123`` for a flight ``KE123``, ``usd``, an order ``o-2002`` in
  Korean, ``e-17`` in Japanese, ``abc_77``, ``c 4821``, ``p77``), and one whose hint's
  example is not the user's value (``O-5555``, "order ids look like O-1001"). For each, the
  model's state after the failed result, the call written when the repeat is shown failing
  (held to the failed tool, as the generation holds it), and whether it is kept.
* ``states``: every state of the development tasks' solution chains (``tasks``,
  ``lookups``, ``yes_no``), its last step shown repeated so: where a call succeeded, a
  respelled call would be a wasted step.

    python -m benchmarks.agents.corrections

Development cases only; about fifteen minutes on 2 cores (default profile, greedy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import backend
from backend.chat.call_review import corrected_call
from backend.chat.chain_state import read_chain_state
from backend.chat.output import ToolCallsFound
from backend.chat.prompt import AnswerOrCall, render_prompt
from backend.chat.repeated_calls import last_reply_calls
from backend.engines.base import SamplingParams
from backend.protocol.schemas import ChatMessage, FunctionCall, ToolCall, ToolDefinition
from benchmarks.agents import world
from benchmarks.agents.call_share import solution_states
from benchmarks.agents.scoring import load_tasks

HERE = Path(__file__).parent


def _tool(name: str, description: str, **parameters: str) -> dict[str, Any]:
    properties = {parameter: {"type": kind} for parameter, kind in parameters.items()}
    schema = {"type": "object", "properties": properties, "required": list(parameters)}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


FLIGHT = _tool(
    "get_flight_status", "Get a flight's status by flight number.", flight_number="string"
)
CURRENCY = _tool(
    "convert_currency",
    "Convert an amount between currencies (ISO codes).",
    amount="number",
    from_currency="string",
    to_currency="string",
)
ORDER = _tool(
    "get_order", "Get the product id and the shipping warehouse of an order.", order_id="string"
)
STOCK = _tool(
    "get_stock",
    "Get the units of a product in stock at a warehouse.",
    product_id="string",
    warehouse="string",
)
MANAGER = _tool(
    "get_manager_id", "Get the employee id of an employee's manager.", employee_id="string"
)
NAME = _tool("get_employee_name", "Get an employee's name by employee id.", employee_id="string")
TICKET = _tool("get_ticket", "Get a support ticket's status by ticket id.", ticket_id="string")
BALANCE = _tool(
    "get_account_balance", "Get a customer's account balance by customer id.", customer_id="string"
)
WEATHER = _tool("get_weather", "Get the current weather in a city.", city="string")

#: (question, tools, the failed call, its result, the value a correction writes or None).
CASES: list[tuple[str, list[dict[str, Any]], tuple[str, dict[str, Any]], str, str | None]] = [
    (
        "What is the status of flight ke 123?",
        [FLIGHT, WEATHER],
        ("get_flight_status", {"flight_number": "ke 123"}),
        "unknown flight number ke 123; flight numbers look like KE123",
        "KE123",
    ),
    (
        "Convert 100 usd to eur.",
        [CURRENCY, WEATHER],
        ("convert_currency", {"amount": 100, "from_currency": "usd", "to_currency": "eur"}),
        "unknown currency usd; currency codes look like USD",
        "USD",
    ),
    (
        "주문 o-2002의 상품은 어느 창고에서 출고되나요?",
        [ORDER, STOCK],
        ("get_order", {"order_id": "o-2002"}),
        "unknown order id o-2002; order ids look like O-1001",
        "O-2002",
    ),
    (
        "社員 e-17 の上司の名前を教えてください。",
        [MANAGER, NAME],
        ("get_manager_id", {"employee_id": "e-17"}),
        "unknown employee id e-17; employee ids look like E-100",
        "E-17",
    ),
    (
        "What is the status of ticket abc_77?",
        [TICKET, WEATHER],
        ("get_ticket", {"ticket_id": "abc_77"}),
        "unknown ticket id abc_77; ticket ids look like ABC-77",
        "ABC-77",
    ),
    (
        "What is the account balance of customer c 4821?",
        [BALANCE, CURRENCY],
        ("get_account_balance", {"customer_id": "c 4821"}),
        "unknown customer id c 4821; customer ids look like C-1234",
        "C-4821",
    ),
    (
        "How many units of product p77 are in stock in Busan?",
        [STOCK, ORDER],
        ("get_stock", {"product_id": "p77", "warehouse": "Busan"}),
        "unknown product id p77; product ids look like P-10",
        "P-77",
    ),
    (
        "Which warehouse does order O-5555 ship from?",
        [ORDER, STOCK],
        ("get_order", {"order_id": "O-5555"}),
        "unknown order id O-5555; order ids look like O-1001",
        None,
    ),
]


def _after_failure(question: str, call: tuple[str, dict[str, Any]], result: str) -> list:
    name, arguments = call
    function = FunctionCall(name=name, arguments=json.dumps(arguments, ensure_ascii=False))
    return [
        ChatMessage(role="user", content=question),
        ChatMessage(
            role="assistant",
            content=None,
            tool_calls=[ToolCall(id="call_1", type="function", function=function)],
        ),
        ChatMessage(role="tool", tool_call_id="call_1", content=result),
    ]


def corrected(engine, prompt: AnswerOrCall, messages: list[ChatMessage]) -> list[tuple]:
    """The calls kept when the last reply's calls are written again and shown failing (the
    generation's own path, greedy)."""
    repeated = [ToolCallsFound(last_reply_calls(messages))]
    params = SamplingParams(max_new_tokens=200, temperature=0.0)
    events = corrected_call(engine, prompt, repeated, params, (), lambda: False, None) or []
    calls = [c for e in events if isinstance(e, ToolCallsFound) for c in e.calls]
    return [(c.function.name, json.loads(c.function.arguments)) for c in calls]


def main() -> None:
    service = backend.connect()._chat_service.get()
    engine = service.engine
    right = 0
    for question, tools, call, result, wanted in CASES:
        messages = _after_failure(question, call, result)
        definitions = [ToolDefinition.model_validate(t) for t in tools]
        prompt = render_prompt(engine.tokenizer, messages, definitions, None, constrained=True)
        assert isinstance(prompt, AnswerOrCall)
        state = read_chain_state(engine, prompt.answer.ids, service._chain_state)
        kept = corrected(engine, prompt, messages)
        values = json.dumps(kept, ensure_ascii=False)
        ok = wanted in values if wanted else not kept
        right += ok
        print(f"{'right' if ok else 'wrong'}  needs a call {state.needs_call:.3f}  {question}")
        print(f"       kept {values}")
    print(f"cases: {right} of {len(CASES)} right\n")
    respelled = states = 0
    for name in ("tasks.jsonl", "tasks_lookups.jsonl", "tasks_yes_no.jsonl"):
        for task in load_tasks(HERE / name):
            tools = [ToolDefinition.model_validate(t) for t in world.openai_tools(task["tools"])]
            for step, _, messages, _ in solution_states(task):
                prompt = render_prompt(engine.tokenizer, messages, tools, None, constrained=True)
                assert isinstance(prompt, AnswerOrCall)
                kept = corrected(engine, prompt, messages)
                states += 1
                respelled += bool(kept)
                if kept:
                    print(f"respelled at {task['id']} step {step}: {kept}")
    print(f"solution states: a respelled call kept at {respelled} of {states}")


if __name__ == "__main__":
    main()
