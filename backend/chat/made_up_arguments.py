"""Arguments the model made up rather than took from the conversation, a fault that comes
from reading a conversation, not from the schema, so the constraint cannot rule it out;
``backend.chat.generation`` shows such calls to the model as failed and it calls again.

* A made-up argument: asked "What is the balance of customer Jun Seo?" with a tool described
  as "balance by customer id (an id such as C-1234)", the 1.5B model calls it with
  ``C-1234`` instead of first looking the id up with the tool that finds it; asked for
  Kenji Sato's manager it calls ``get_manager_id("12345")``. An id or a code is data, and
  the data of a conversation is what its messages say. A string argument holding a digit,
  found in no message of the conversation, is taken as made up when it is copied from an
  offered tool's definition, or when its parameter names an identifier (``id``,
  ``customer_id``, ``orderId``, ``order_number``, ``code``). An ``id`` parameter's value
  needs no digit to be made up: asked for Mina Park's email, the model called
  ``get_employee_email("MinaPark")``. One in no message and no definition is made up, and so
  is a name given as an id (words with spaces and no digit: ``get_manager_id("Kenji
  Sato")``, though the user said it). Other values are left alone: choosing a value a
  description names ("celsius or fahrenheit"), writing a date or a number the message gives
  in words, or a code ("EUR" for euros), is how such arguments are meant to be filled.
* A made-up number: a number (other than 0 and 1) given to a required parameter when no
  message of the conversation states any number (``backend.chat.stated_numbers``) and no
  definition shows it (``convert_units(25, ...)`` asked for Seoul's temperature in
  Fahrenheit). A number made up again in the call made after the model is told is kept
  where that reply keeps no other call: a number may be written in words this module does
  not read. Beside another call (the lookup it was told of) it is dropped, to be made once
  that call's result gives the value. After tool results a conversation states numbers (a
  customer id ``C-4821`` holds one), yet the model still wrote amounts from nowhere: asked
  for Jun Seo's balance in euros, it found his id and then called
  ``convert_currency(100, "USD", "EUR")`` before looking up the balance. So there, where
  every number the conversation holds can be read (``stated_numbers``), a number is made
  up when it is none of them: not as written, rounded, nor as a percentage (5% passed as
  0.05). On a first step the request's own numbers may be turned into others (a rate, a
  sum, a unit), so the rule waits for results, unless the request's only numbers are the
  digits of codes (``stated_numbers.states_a_quantity``): asked for customer C-6090's balance
  in yen, the model called ``convert_currency(1000, "USD", "JPY")`` beside the balance's
  lookup, an amount no id's digits could give.
* An id of another kind than its parameter asks for, where an offered tool turns that kind
  into the one asked for: an order id given as a ``product_id`` beside ``get_order``, which
  gives the product id (``backend.chat.parameter_kinds``). It is in the message, but the
  call skipped the lookup that reads it.
* An id given to the tool that finds ids of its kind (``find_customer_id(name="C-5512")``,
  ``parameter_kinds.kind_looked_up``): the call can find nothing the conversation lacks.

The model, told of a made-up value, is also told which offered tool gives it where a tool's
description names the parameter (``get_order`` "Get the product id ..." for a made-up
``product_id``): shown only "find the real value with another tool", it looked up a name
from nowhere instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.chat.parameter_kinds import (
    ID_PARAMETER,
    IDENTIFIER_PARAMETER,
    kind_given,
    kind_looked_up,
    parameter_words,
    tools_giving,
)
from backend.chat.stated_numbers import (
    stated_numbers,
    states_a_number,
    states_a_quantity,
    states_value,
)
from backend.protocol.schemas import ChatMessage, FunctionCall, ToolCall, ToolDefinition

#: What the model is told of a call with made-up ``{values}``, in the exchange after which it
#: calls again (``unfounded_exchange``).
UNFOUNDED_RESULT = (
    "error: {values} is not a value from this conversation (neither the user nor a tool "
    "result gave it). First find the real value with another tool."
)
#: What the model is told of a call that gives a name where an id is asked for.
NAME_AS_ID_RESULT = "error: {values} is a name, not an id. First find the id with another tool."
#: What the model is told of an id of another kind than the parameter asks for.
OTHER_KIND_RESULT = (
    "error: {value} is {kind}, not {asked}. First find the {wanted} with another tool."
)
#: What the model is told of an id given to the tool that finds ids of its kind.
LOOKED_UP_RESULT = (
    "error: {value} is already {kind}, not {asked} to look up. Give it to a tool that takes {kind}."
)


def conversation_text(messages: Sequence[ChatMessage]) -> str:
    """What the conversation's messages say (the arguments of earlier calls included), as
    written: where an argument's value should come from."""
    parts = [m.content or "" for m in messages]
    parts += [call.function.arguments for m in messages for call in m.tool_calls or ()]
    return "\n".join(parts)


def argument_object(call: FunctionCall) -> dict[str, Any] | None:
    """A call's arguments as a JSON object; None when they are not one."""
    try:
        arguments = json.loads(call.arguments)
    except json.JSONDecodeError:
        return None
    return arguments if isinstance(arguments, dict) else None


def respaced_arguments(call: FunctionCall, said: str) -> FunctionCall:
    """``call`` with each string argument that the conversation (``said``) holds only with
    spaces the model left out written as the conversation writes it: asked for "Mina Park
    직원의 이메일", the 1.5B model looked up ``"MinaPark"``, whom no tool knows. Values of
    four characters or more, without a space, in no message as written (case aside)."""
    arguments = argument_object(call)
    if arguments is None:
        return call
    folded = said.casefold()
    changed = False
    for parameter, value in arguments.items():
        if not isinstance(value, str) or len(value) < 4 or value.casefold() in folded:
            continue
        if any(c.isspace() for c in value):
            continue
        spaced = re.search(r"[ \t]*".join(map(re.escape, value)), said, re.IGNORECASE)
        if spaced and spaced[0] != value:
            arguments[parameter] = spaced[0]
            changed = True
    if not changed:
        return call
    return call.model_copy(update={"arguments": json.dumps(arguments, ensure_ascii=False)})


def unfounded_arguments(
    call: FunctionCall,
    tools: Sequence[ToolDefinition],
    said: str,
    numbers: bool = True,
    after_results: bool = False,
) -> UnfoundedValues:
    """The argument values of ``call`` that look made up.

    Strings holding a digit, not in ``said`` (``conversation_text``), and copied from an
    offered tool's definition or given to a parameter that names an identifier; strings
    given to an ``id`` parameter without a digit, in no message nor definition, or a name
    (``names``); an id of another kind than its parameter asks for, where an offered tool
    turns that kind into the one asked for (``parameter_kinds.kind_given``); an id given
    to the tool that finds ids of its kind (``parameter_kinds.kind_looked_up``); with
    ``numbers``, numbers given to a required parameter that no definition
    shows, where ``said`` states none or, ``after_results`` or where it states only codes'
    digits, states none of them (``numbers_to_come_from``).
    """
    said = said.casefold()
    described = "\n".join(_definition_text(tool) for tool in tools).casefold()
    try:
        arguments = json.loads(call.arguments)
    except json.JSONDecodeError:
        return UnfoundedValues()
    found = UnfoundedValues()
    for parameter, value in _strings(arguments, ""):
        text = value.strip().casefold()
        if any(c.isdigit() for c in text):
            if text not in said and (text in described or IDENTIFIER_PARAMETER.search(parameter)):
                found.add(parameter, value)
            elif kind := kind_given(parameter, value, tools, call.name):
                found.add(parameter, value, kind=kind)
            elif kind := kind_looked_up(value, tools, call.name):
                found.add(parameter, value, looked_up=kind)
        elif ID_PARAMETER.search(parameter):
            if any(c.isspace() for c in text):
                found.add(parameter, value, name=True)
            elif text not in said and text not in described:
                found.add(parameter, value)
    stated = numbers_to_come_from(said, after_results) if numbers else None
    if stated is not None and isinstance(arguments, dict):
        required = _required(call.name, tools)
        for parameter, value in arguments.items():
            if parameter in required and _made_up_number(value, described, stated):
                found.add(parameter, json.dumps(value))
    return found


def numbers_to_come_from(said: str, after_results: bool) -> list[float] | None:
    """The numbers a number argument must be one of: none where ``said`` states no number;
    after tool results, or where its only numbers are codes' digits (``states_a_quantity``),
    those it states where every one can be read (``stated_numbers``); None where a number may
    come from the conversation in a way not read here."""
    if not states_a_number(said):
        return []
    return stated_numbers(said) if after_results or not states_a_quantity(said) else None


def _made_up_number(value: Any, described: str, stated: Sequence[float]) -> bool:
    """A number that is none of the ``stated`` ones and that no definition shows: 0 and 1
    stand for "none" and "a" in words."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value in (0, 1):
        return False
    if json.dumps(value) in described:
        return False
    return not any(_states(number, float(value)) for number in stated)


def _states(number: float, value: float) -> bool:
    """Whether the stated ``number`` gives ``value`` as written, rounded to a whole, a tenth
    or a hundredth, or as a percentage (``stated_numbers.states_value``), signs aside."""
    roundings = (number, round(number), round(number, 1), round(number, 2))
    return any(states_value(rounded, value) for rounded in roundings)


def _required(name: str, tools: Sequence[ToolDefinition]) -> set[str]:
    tool = next((t for t in tools if t.function.name == name), None)
    return set((tool.function.parameters or {}).get("required") or ()) if tool else set()


@dataclass
class UnfoundedValues:
    """A call's made-up argument values (``unfounded_arguments``): values from nowhere,
    names given as ids, ids of another kind than asked for, and ids given to be looked up."""

    values: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    #: Ids of another kind: (the value, its kind, the kind asked for), such as ("O-1003",
    #: "order id", "product id").
    other_kinds: list[tuple[str, str, str]] = field(default_factory=list)
    #: Ids given to the tool that finds ids of their kind: (the value, its kind, the kind
    #: the parameter asks for), such as ("C-5512", "customer id", "name").
    looked_up: list[tuple[str, str, str]] = field(default_factory=list)
    #: The parameters the values and names were given to, in order.
    parameters: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.values or self.names or self.other_kinds or self.looked_up)

    def add(
        self, parameter: str, value: str, name: bool = False, kind: str = "", looked_up: str = ""
    ) -> None:
        if kind:
            self.other_kinds.append((value, kind, parameter_words(parameter)))
        elif looked_up:
            self.looked_up.append((value, looked_up, parameter_words(parameter)))
        else:
            (self.names if name else self.values).append(value)
        self.parameters.append(parameter)

    def result(self, tools: Sequence[ToolDefinition] = (), called: str = "") -> str:
        """What the model is told of the call to ``called``: which values are made up, and
        which of ``tools`` give them."""
        parts = [
            template.format(values=", ".join(values))
            for template, values in (
                (UNFOUNDED_RESULT, self.values),
                (NAME_AS_ID_RESULT, self.names),
            )
            if values
        ]
        for value, kind, asked in self.other_kinds:
            parts.append(
                OTHER_KIND_RESULT.format(
                    value=value, kind=_with_article(kind), asked=_with_article(asked), wanted=asked
                )
            )
        for value, kind, asked in self.looked_up:
            parts.append(
                LOOKED_UP_RESULT.format(
                    value=value, kind=_with_article(kind), asked=_with_article(asked)
                )
            )
        for parameter in dict.fromkeys(self.parameters):
            if giving := tools_giving(parameter, tools, called):
                parts.append(f"{', '.join(giving)} gives the {parameter_words(parameter)}.")
        return " ".join(parts)


def _with_article(words: str) -> str:
    """ "an order id", "a product id"."""
    return f"{'an' if words[:1] in 'aeiou' else 'a'} {words}"


@dataclass(frozen=True)
class UnfoundedCall:
    """A generated call and the argument values it made up."""

    call: ToolCall
    values: UnfoundedValues


def tools_giving_every(
    unfounded: Sequence[UnfoundedCall], tools: Sequence[ToolDefinition]
) -> list[ToolDefinition]:
    """The offered tools that give the made-up values (``tools_giving``) where every call of
    ``unfounded`` has one for each made-up value; else none. The call made after the model
    is told is held to them: told only that ``get_order`` gives the product id it lacked, the
    model still looked up a customer by a name from nowhere ("John Doe") through LangChain
    (benchmarks/README.md, "Made-up numbers, the tool that gives a made-up value")."""
    giving: dict[str, None] = {}
    for u in unfounded:
        for parameter in u.values.parameters:
            found = tools_giving(parameter, tools, u.call.function.name)
            if not found:
                return []
            giving.update(dict.fromkeys(found))
    return [tool for tool in tools if tool.function.name in giving]


def unfounded_exchange(
    unfounded: Sequence[UnfoundedCall], tools: Sequence[ToolDefinition] = ()
) -> list[ChatMessage]:
    """The calls with made-up values, and for each a result saying so and naming the
    ``tools`` that give them: the model, shown this after the conversation, calls again."""
    results = [
        ChatMessage(
            role="tool",
            tool_call_id=u.call.id,
            content=u.values.result(tools, u.call.function.name),
        )
        for u in unfounded
    ]
    calls = [u.call for u in unfounded]
    return [ChatMessage(role="assistant", content=None, tool_calls=calls), *results]


def _definition_text(tool: ToolDefinition) -> str:
    function = tool.function
    parameters = json.dumps(function.parameters or {}, ensure_ascii=False)
    return f"{function.description or ''}\n{parameters}"


def _strings(value: Any, parameter: str) -> Iterator[tuple[str, str]]:
    """Every non-empty string in ``value``, with the name of the parameter it is under."""
    if isinstance(value, str):
        if value.strip():
            yield parameter, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, parameter)
