"""A small fictional world and its tools, as users write them: plain functions with type hints
and a one-line docstring, deterministic, answering with short strings (an error string for an
unknown id or name, never an exception, as most agent frameworks pass tool output back as text).

Several domains so the task set is not one pattern: customers, currency, orders and stock,
employees, trains, weather, a calculator and a unit converter. ``get_account_balance``'s
docstring names an example id (C-1234) that is no customer, so a model that copies the
example instead of looking the id up is told so and fails.

``call(name, args)`` runs a tool by name; ``openai_tools``, ``langchain_tools`` and
``llamaindex_tools`` offer the named tools to each loop.
"""

from __future__ import annotations

import ast
import inspect
import operator
from collections.abc import Callable
from typing import Any

CUSTOMERS = {  # id: (name, balance in USD, last order)
    "C-4821": ("Jun Seo", 1250.00, "O-1001"),
    "C-3307": ("Maria Lopez", 87.50, "O-1002"),
    "C-5512": ("Hiroshi Tanaka", 3420.75, "O-1003"),
    "C-6090": ("Amara Okafor", 610.00, "O-1004"),
}
RATES_FROM_USD = {"USD": 1.0, "EUR": 0.92, "KRW": 1380.0, "JPY": 150.0, "GBP": 0.79}
ORDERS = {  # id: (product id, warehouse)
    "O-1001": ("P-77", "Busan"),
    "O-1002": ("P-15", "Osaka"),
    "O-1003": ("P-31", "Busan"),
    "O-1004": ("P-77", "Rotterdam"),
}
STOCK = {
    ("P-77", "Busan"): 42,
    ("P-77", "Osaka"): 9,
    ("P-77", "Rotterdam"): 130,
    ("P-15", "Osaka"): 0,
    ("P-15", "Busan"): 18,
    ("P-31", "Busan"): 256,
}
EMPLOYEES = {  # id: (name, manager id, email)
    "E-101": ("Grace Hopper", None, "g.hopper@corp.example"),
    "E-203": ("Mina Park", "E-101", "mpark7@corp.example"),
    "E-245": ("Kenji Sato", "E-203", "ksato.dev@corp.example"),
    "E-318": ("Lena Fischer", "E-245", "lena.f@corp.example"),
}
TRAINS = {  # (origin, destination): number
    ("Seoul", "Busan"): "KTX-117",
    ("Tokyo", "Osaka"): "NOZOMI-225",
    ("Busan", "Seoul"): "KTX-142",
}
TRAIN_STATUS = {
    "KTX-117": "delayed 15 minutes, platform 4",
    "NOZOMI-225": "on time, platform 18",
    "KTX-142": "cancelled",
}
WEATHER = {  # city: (degrees Celsius, sky)
    "Seoul": (18, "light rain"),
    "Tokyo": (23, "sunny"),
    "Paris": (11, "cloudy"),
    "Busan": (21, "windy"),
    "Osaka": (25, "clear"),
}
UNITS = {  # (from, to): factor, or a function for temperatures
    ("km", "miles"): 0.621371,
    ("miles", "km"): 1.609344,
    ("kg", "lb"): 2.204623,
    ("lb", "kg"): 0.453592,
}


def _number(value: float) -> str:
    """1250.0 -> '1,250.00': two decimals with thousands separators, as a bank shows money."""
    return f"{value:,.2f}"


def find_customer_id(name: str) -> str:
    """Find a customer's id by their full name."""
    for customer_id, (customer_name, _, _) in CUSTOMERS.items():
        if customer_name.lower() == name.strip().lower():
            return customer_id
    return f"unknown customer name {name}"


def get_account_balance(customer_id: str) -> str:
    """Get the account balance in USD of a customer by id (an id such as C-1234)."""
    if customer_id not in CUSTOMERS:
        return f"unknown customer id {customer_id}"
    return f"balance of {customer_id}: {_number(CUSTOMERS[customer_id][1])} USD"


def get_last_order(customer_id: str) -> str:
    """Get the id of the last order a customer placed, by customer id."""
    if customer_id not in CUSTOMERS:
        return f"unknown customer id {customer_id}"
    return f"last order of {customer_id}: {CUSTOMERS[customer_id][2]}"


def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money from one currency code to another (e.g. USD to EUR)."""
    source, target = from_currency.strip().upper(), to_currency.strip().upper()
    for code in (source, target):
        if code not in RATES_FROM_USD:
            return f"unknown currency {code}"
    converted = float(amount) / RATES_FROM_USD[source] * RATES_FROM_USD[target]
    return f"{_number(float(amount))} {source} = {_number(converted)} {target}"


def get_order(order_id: str) -> str:
    """Get the product id and the shipping warehouse of an order by order id."""
    if order_id not in ORDERS:
        return f"unknown order id {order_id}; order ids look like O-1001"
    product_id, warehouse = ORDERS[order_id]
    return f"order {order_id}: product {product_id}, warehouse {warehouse}"


def get_stock(product_id: str, warehouse: str) -> str:
    """Get the number of units of a product in stock at a warehouse."""
    if not any(product == product_id for product, _ in STOCK):
        return f"unknown product id {product_id}"
    units = STOCK.get((product_id, warehouse.strip().title()))
    if units is None:
        return f"no stock record for {product_id} at {warehouse}"
    return f"{product_id} at {warehouse.strip().title()}: {units} units"


def find_employee_id(name: str) -> str:
    """Find an employee's id by their full name."""
    for employee_id, (employee_name, _, _) in EMPLOYEES.items():
        if employee_name.lower() == name.strip().lower():
            return employee_id
    return f"unknown employee name {name}"


def get_employee_name(employee_id: str) -> str:
    """Get an employee's full name by employee id."""
    if employee_id not in EMPLOYEES:
        return f"unknown employee id {employee_id}"
    return f"{employee_id}: {EMPLOYEES[employee_id][0]}"


def get_manager_id(employee_id: str) -> str:
    """Get the employee id of an employee's manager."""
    if employee_id not in EMPLOYEES:
        return f"unknown employee id {employee_id}"
    manager = EMPLOYEES[employee_id][1]
    return f"manager of {employee_id}: {manager}" if manager else f"{employee_id} has no manager"


def get_employee_email(employee_id: str) -> str:
    """Get the email address of an employee by employee id."""
    if employee_id not in EMPLOYEES:
        return f"unknown employee id {employee_id}"
    return f"email of {employee_id}: {EMPLOYEES[employee_id][2]}"


def find_train(origin: str, destination: str) -> str:
    """Find the train number running from an origin city to a destination city."""
    number = TRAINS.get((origin.strip().title(), destination.strip().title()))
    if number is None:
        return f"no train from {origin} to {destination}"
    return f"train from {origin.strip().title()} to {destination.strip().title()}: {number}"


def get_train_status(train_number: str) -> str:
    """Get the current status of a train by its number."""
    status = TRAIN_STATUS.get(train_number.strip().upper())
    if status is None:
        return f"unknown train number {train_number}"
    return f"{train_number.strip().upper()}: {status}"


def get_weather(city: str) -> str:
    """Get the current weather in a city, temperature in Celsius."""
    reading = WEATHER.get(city.strip().title())
    if reading is None:
        return f"no weather data for {city}"
    return f"{city.strip().title()}: {reading[0]} °C, {reading[1]}"


_OPERATORS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.AST) -> float:
    """Arithmetic only: numbers, + - * / ** and parentheses (never Python's eval)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError("not arithmetic")


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression such as (12 + 3) * 4."""
    try:
        value = _evaluate(ast.parse(expression.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError):
        return f"cannot evaluate {expression}"
    return f"{expression.strip()} = {round(value, 4):g}"


def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a value between units: km/miles, kg/lb, celsius/fahrenheit."""
    source, target = from_unit.strip().lower(), to_unit.strip().lower()
    if (source, target) == ("celsius", "fahrenheit"):
        converted = float(value) * 9 / 5 + 32
    elif (source, target) == ("fahrenheit", "celsius"):
        converted = (float(value) - 32) * 5 / 9
    elif (source, target) in UNITS:
        converted = float(value) * UNITS[(source, target)]
    else:
        return f"cannot convert {from_unit} to {to_unit}"
    return f"{value:g} {source} = {round(converted, 2):g} {target}"


TOOLS: dict[str, Callable[..., str]] = {
    function.__name__: function
    for function in (
        find_customer_id,
        get_account_balance,
        get_last_order,
        convert_currency,
        get_order,
        get_stock,
        find_employee_id,
        get_employee_name,
        get_manager_id,
        get_employee_email,
        find_train,
        get_train_status,
        get_weather,
        calculate,
        convert_units,
    )
}


def call(name: str, args: dict[str, Any]) -> str:
    """Run the tool ``name`` with ``args`` as a loop would, a wrong call answered as text."""
    if name not in TOOLS:
        return f"unknown tool {name}"
    if not isinstance(args, dict):
        return f"bad arguments for {name}: expected an object"
    try:
        inspect.signature(TOOLS[name]).bind(**args)
    except TypeError as error:
        return f"bad arguments for {name}: {error}"
    try:
        return TOOLS[name](**args)
    except (TypeError, ValueError, AttributeError) as error:  # a number given as text, ...
        return f"bad arguments for {name}: {error}"


_JSON_TYPES = {str: "string", float: "number", int: "integer"}


def openai_tools(names: list[str]) -> list[dict[str, Any]]:
    """The named tools in OpenAI's ``tools`` shape, their schema read from the signatures."""
    tools = []
    for name in names:
        function = TOOLS[name]
        parameters = inspect.signature(function).parameters
        properties = {
            parameter: {"type": _JSON_TYPES[eval_annotation(function, parameter)]}
            for parameter in parameters
        }
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": inspect.getdoc(function),
                    "parameters": {
                        "type": "object",
                        "properties": properties,
                        "required": list(parameters),
                    },
                },
            }
        )
    return tools


def eval_annotation(function: Callable[..., str], parameter: str) -> type:
    """A parameter's type (annotations are strings under ``from __future__ import annotations``)."""
    return inspect.get_annotations(function, eval_str=True)[parameter]


def langchain_tools(names: list[str]) -> list[Any]:
    """The named tools as LangChain ``StructuredTool`` objects, as ``@tool`` would build them."""
    from langchain_core.tools import StructuredTool

    return [StructuredTool.from_function(TOOLS[name]) for name in names]


def llamaindex_tools(names: list[str]) -> list[Any]:
    """The named tools as LlamaIndex ``FunctionTool`` objects."""
    from llama_index.core.tools import FunctionTool

    return [FunctionTool.from_defaults(fn=TOOLS[name]) for name in names]
