"""Calls that repeat one already answered: the same tool with the same arguments as a call
whose result the conversation holds, or as one earlier in the same reply, would only give the
same result again. Once tools stay offered after results, the small Qwen models often write
the call they just made again instead of answering; ``backend.chat.generation`` drops such
calls after they are generated (a reading of the conversation the constraint cannot make).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from backend.protocol.schemas import ChatMessage, ToolCall

#: A call as compared with others: the tool's name and its arguments as canonical JSON.
CallKey = tuple[str, str]


def call_key(name: str, arguments: str) -> CallKey:
    """What makes two calls the same call: the tool and the arguments as values (key order
    and spacing aside)."""
    return name, json.dumps(parsed_arguments(arguments), sort_keys=True, ensure_ascii=False)


def parsed_arguments(arguments: str) -> Any:
    """A call's arguments as JSON values; text that is not JSON as it is."""
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def answered_calls(messages: Sequence[ChatMessage]) -> dict[CallKey, str]:
    """The ``call_key`` of every call in ``messages`` that a tool message answered, with
    that message's content (the last one's, where the same call was answered twice)."""
    results = {m.tool_call_id: m.content or "" for m in messages if m.role == "tool"}
    return {
        call_key(call.function.name, call.function.arguments): results[call.id]
        for m in messages
        for call in m.tool_calls or ()
        if call.id in results
    }


def last_reply_calls(messages: Sequence[ChatMessage]) -> list[ToolCall]:
    """The calls of the conversation's last reply, where tool messages answering it end the
    conversation; else none."""
    end = len(messages)
    while end > 0 and messages[end - 1].role == "tool":
        end -= 1
    if end == len(messages) or end == 0:
        return []
    return list(messages[end - 1].tool_calls or ())


def last_calls_written(messages: Sequence[ChatMessage], several: bool) -> str:
    """The calls of the conversation's last reply, answered by the tool messages that end it
    (``last_reply_calls``), written as the call constraint writes a reply that repeats them:
    an array of them where a reply may hold several calls, else the first. "" when the
    conversation does not end in their results. A draft of what the model writes when it
    repeats itself (``SamplingParams.draft``), checked in one evaluation instead of decoded."""
    calls = last_reply_calls(messages)
    if not calls:
        return ""
    written = [
        json.dumps(
            {"name": call.function.name, "arguments": parsed_arguments(call.function.arguments)},
            ensure_ascii=False,
        )
        for call in calls
    ]
    return f"[{', '.join(written)}]" if several else written[0]
