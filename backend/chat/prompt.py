"""Rendering a chat request into what the engine generates from, through the model's own
chat template.

A request is answered in one of two ways, each a type of its own:

* ``Generation``: one generation from one prompt. Without tools; with tools on an engine that
  cannot constrain decoding (calls are parsed from free text); or with a call forced
  (``required`` or a named function), whose opening is already written in the prompt and,
  where the engine can, generated under the tools' schema.
* ``AnswerOrCall``: ``tool_choice`` ``auto`` on an engine that constrains decoding. The answer
  starts freely; if it opens a call, the ``call`` generation, constrained to the tools'
  schemas, is run instead (``backend.chat.generation``). This holds after tool results too:
  the tools stay offered and the model decides between another call and an answer, as at
  OpenAI and in vLLM. A call that repeats one the conversation already answered is dropped
  (``AnswerOrCall.answered``); where the model's state says the chain needs another call
  and every call repeats one, the model calls once more, held to the tools the last step
  did not call (``backend.chat.next_in_chain``), and when nothing is left the ``plain``
  generation answers from the results without tools.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.chat.made_up_arguments import conversation_text
from backend.chat.next_in_chain import LastStep, last_step
from backend.chat.number_lists import spaced_number_lists
from backend.chat.repeated_calls import (
    CallKey,
    answered_calls,
    last_calls_written,
    parsed_arguments,
)
from backend.chat.shown_tools import shown_tools
from backend.chat.tool_calls import (
    SEVERAL_CALLS_FORMAT,
    call_constraint,
    call_prefill,
    several_calls_allowed,
)
from backend.chat.tool_need import ToolNeedCheck
from backend.engines.base import JSONSchemaConstraint
from backend.protocol.errors import BadRequestError
from backend.protocol.schemas import ChatMessage, ToolChoice, ToolChoiceObject, ToolDefinition

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


@dataclass(frozen=True)
class Generation:
    """One generation: its prompt, and what reading its output needs."""

    ids: list[int]
    #: Text placed at the start of the assistant turn (a forced call's opening); it is part
    #: of what is parsed, not of what is generated.
    prefill: str = ""
    #: Names of the tools the model may call; empty when tools are off.
    tool_names: frozenset[str] = field(default_factory=frozenset)
    #: The schema the output must follow, for an engine that constrains decoding.
    constraint: JSONSchemaConstraint | None = None
    #: Whether the reply may hold several tool calls (``parallel_tool_calls``).
    parallel_calls: bool = True


@dataclass(frozen=True)
class AnswerOrCall:
    """``tool_choice`` ``auto`` where calls are constrained: ``answer`` starts freely, and if
    it opens a call, ``call`` (constrained, from the call's opening) is run instead."""

    answer: Generation
    call: Generation
    #: The answer without tools, run instead when every generated call is dropped.
    plain: Generation
    #: Where the conversation ends with a user message: what checking that a generated call
    #: is wanted needs (``backend.chat.tool_need``).
    tool_need: ToolNeedCheck | None = None
    #: The calls the conversation already holds with their results (``call_key``), each
    #: with its result: a reply never repeats one (``backend.chat.repeated_calls``).
    answered: Mapping[CallKey, str] = field(default_factory=dict)
    #: Whether the conversation ends in tool results (the step after a call).
    after_results: bool = False
    #: After tool results: the tokens of a call repeating the last reply's calls, as the
    #: constraint writes it (``repeated_calls.last_calls_written``): ``call``'s draft.
    repeat: tuple[int, ...] = ()
    #: After tool results: the step they answer, which a call made again after a repeat
    #: builds on (``backend.chat.next_in_chain``).
    last_step: LastStep | None = None
    #: The tools offered, and what the conversation says (``conversation_text``): what
    #: finding made-up arguments needs (``backend.chat.made_up_arguments``).
    tools: tuple[ToolDefinition, ...] = ()
    said: str = ""
    #: The same request with more messages at the end of its conversation (whose ``call``
    #: is generated after an exchange the client never sees, ``backend.chat.made_up_arguments``).
    continued: Callable[[Sequence[ChatMessage]], AnswerOrCall] | None = None

    @property
    def ids(self) -> list[int]:
        """The prompt the answer starts from (what the usage counts)."""
        return self.answer.ids


RenderedPrompt = Generation | AnswerOrCall


def _template_message(message: ChatMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.tool_calls:
        # Templates render arguments with ``tojson``: give them objects, not JSON strings,
        # or the model sees doubly-encoded arguments and learns to write them that way.
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.function.name,
                    "arguments": parsed_arguments(call.function.arguments),
                },
            }
            for call in message.tool_calls
        ]
    if message.role == "tool":
        entry["tool_call_id"] = message.tool_call_id
    return entry


def _with_spaced_lists(message: ChatMessage) -> ChatMessage:
    """A user message as the model reads it in a request that offers tools: lists of numbers
    typed without a space after the comma spaced (``backend.chat.number_lists``)."""
    if message.role != "user" or not message.content:
        return message
    return message.model_copy(update={"content": spaced_number_lists(message.content)})


def _with_tool_results_as_user_turn(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation with the tool calls and results since its last user message rewritten
    as one user turn, for answering from them without tools.

    Shown the results as plain text with the instruction to answer, the small Qwen models
    answer from them; this is what replaces a reply whose calls all repeat answered ones.
    Every result gathered since the question is listed, not only the last call's: asked which
    order Maria Lopez placed last, after her id, her last order's id and that order's
    product, the 1.5B model shown only the last result described the product and left out
    the order asked for. The question is written again after the results, where the model
    reads it last: asked for a manager's name, shown the manager's id and then the name, it
    gave the id, and asked a yes-or-no question it echoed the question ("Yes, it is sunny")
    over a result that said otherwise (``benchmarks/README.md``, "Agents that chain tools").
    Exchanges before the last user message keep the template's form.
    """
    asked = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    question = messages[asked].content if asked >= 0 else None
    since = messages[asked + 1 :]
    calls = {call.id: call for m in since for call in m.tool_calls or ()}
    lines = []
    for message in since:
        if message.role != "tool":
            continue
        call = calls.get(message.tool_call_id or "")
        name = f"{call.function.name}({call.function.arguments})" if call else "a tool"
        lines.append(f"- {name} returned: {message.content or ''}")
    ask = "Using these results, answer my question"
    ask = f"{ask}: {question}" if question else f"{ask}."
    listed = "\n".join(lines)
    results = {"role": "user", "content": f"Results of the tool calls:\n{listed}\n\n{ask}"}
    # Other messages since the question (a system message, an assistant's text) stay.
    kept = [m for m in since if m.role != "tool" and not m.tool_calls]
    head = [*messages[: asked + 1], *kept]
    return [_template_message(m) for m in head] + [results]


def render_prompt(
    tokenizer: Any,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolDefinition] | None = None,
    tool_choice: ToolChoice | None = None,
    constrained: bool = False,
    answer_format: JSONSchemaConstraint | None = None,
    parallel_calls: bool = True,
) -> RenderedPrompt:
    """Apply the chat template (with tool definitions) and tokenize.

    The tools are shown as ``backend.chat.shown_tools`` writes them, whichever framework
    described them. ``tool_choice="none"`` renders without tools, so the model cannot call
    one. Without a system message the default one is used, so the model does not introduce
    itself under its upstream name. ``constrained``: the engine constrains output to a JSON
    Schema, so calls are generated under the tools' schemas
    (``backend.chat.tool_calls.call_constraint``).
    ``answer_format``: answers (not calls) are generated under it
    (``backend.chat.response_format``); the system message asks for it too, since a model that
    knows the schema fills it better than one only held to it. ``parallel_calls``: a reply
    may hold several calls (``parallel_tool_calls``); a forced function is called once.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise BadRequestError(
            "invalid request: the configured chat model has no chat template; configure an "
            "instruction-tuned model"
        )
    active_tools = shown_tools(tools or ()) if tool_choice != "none" else []
    shown = [_with_spaced_lists(m) for m in messages] if active_tools else messages
    conversation = _with_system([_template_message(m) for m in shown], answer_format)
    if not constrained and messages[-1].role == "tool" and tool_choice in (None, "auto"):
        # Calls parsed from free text are not reviewed (``backend.chat.repeated_calls`` needs
        # the call generated apart): without it the small models repeat the call they just
        # made, so such an engine answers from the results, without tools.
        conversation = _with_system(_with_tool_results_as_user_turn(messages), answer_format)
        active_tools = []
    template_tools = [t.model_dump(exclude_none=True) for t in active_tools] or None
    parallel_calls = several_calls_allowed(parallel_calls, tool_choice)
    text = tokenizer.apply_chat_template(
        _with_call_format(conversation, constrained and parallel_calls and bool(active_tools)),
        tools=template_tools,
        add_generation_prompt=True,
        tokenize=False,
    )

    def tokens(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    tool_names = frozenset(t.function.name for t in active_tools)
    if not (constrained and active_tools):
        prefill = call_prefill(tool_choice, constrained=False) if active_tools else ""
        constraint = None if active_tools else answer_format
        return Generation(tokens(text + prefill), prefill, tool_names, constraint, parallel_calls)
    if isinstance(tool_choice, ToolChoiceObject):
        active_tools = [t for t in active_tools if t.function.name == tool_choice.function.name]
    prefill = call_prefill(tool_choice, constrained=True)
    constraint = call_constraint(active_tools, parallel_calls)
    call = Generation(tokens(text + prefill), prefill, tool_names, constraint, parallel_calls)
    if tool_choice not in (None, "auto"):
        return call

    def continued(more: Sequence[ChatMessage]) -> AnswerOrCall:
        longer = [*messages, *more]
        rendered = render_prompt(
            tokenizer, longer, tools, tool_choice, constrained, answer_format, parallel_calls
        )
        assert isinstance(rendered, AnswerOrCall)
        return rendered

    if messages[-1].role == "tool":
        conversation = _with_system(_with_tool_results_as_user_turn(messages), answer_format)
    plain = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    tool_need = None
    if messages[-1].role == "user":
        tool_need = ToolNeedCheck(
            message=messages[-1].content or "",
            descriptions={t.function.name: t.function.description or "" for t in active_tools},
        )
    return AnswerOrCall(
        answer=Generation(tokens(text), "", tool_names, answer_format, parallel_calls),
        call=call,
        plain=Generation(tokens(plain), constraint=answer_format),
        tool_need=tool_need,
        answered=answered_calls(messages),
        after_results=messages[-1].role == "tool",
        repeat=tuple(tokens(last_calls_written(messages, parallel_calls))),
        last_step=last_step(messages),
        tools=tuple(active_tools),
        said=conversation_text(messages),
        continued=continued,
    )


def _with_system(
    conversation: list[dict[str, Any]], answer_format: JSONSchemaConstraint | None
) -> list[dict[str, Any]]:
    """The conversation opened by a system message (the default one if it has none), which
    asks for ``answer_format`` where there is one."""
    if conversation[0]["role"] != "system":
        conversation = [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}, *conversation]
    if answer_format is not None:
        system = conversation[0]
        content = _asking_for(answer_format, system["content"])
        conversation = [{**system, "content": content}, *conversation[1:]]
    return conversation


def _with_call_format(conversation: list[dict[str, Any]], several: bool) -> list[dict[str, Any]]:
    """The conversation whose system message also describes the array of calls that
    ``call_constraint`` holds a reply of several calls to (``SEVERAL_CALLS_FORMAT``)."""
    if not several:
        return conversation
    system = conversation[0]
    content = f"{system['content']}\n\n{SEVERAL_CALLS_FORMAT}"
    return [{**system, "content": content}, *conversation[1:]]


def _asking_for(answer_format: JSONSchemaConstraint, system: str | None) -> str:
    if answer_format.strict:
        schema = answer_format.schema_json
        ask = f"Answer with one JSON value valid against this JSON Schema:\n{schema}"
    else:
        ask = "Answer with one JSON object."
    return f"{system}\n\n{ask}" if system else ask
