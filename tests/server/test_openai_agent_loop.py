"""The tool loop an ``openai`` SDK user writes, against the real server on 127.0.0.1, running
a chain of two dependent tool calls to its end (issue 50): with the model's choices scripted
(``tests.agent_chain``), and on the real small-profile model."""

from __future__ import annotations

import json

import pytest

openai = pytest.importorskip("openai")

from backend.testing import offline_backend  # noqa: E402
from backend.testing.servers import RunningServer, running_server  # noqa: E402
from tests.agent_chain import (  # noqa: E402
    ANSWER,
    EXPECTED_CALLS,
    QUESTION,
    TOOL_FUNCTIONS,
    TOOLS,
    ChainEngine,
)

MAX_ROUNDS = 6


def _loop(server: RunningServer, stream: bool = False) -> tuple[list[list], str | None]:
    """Each round's calls and the final answer (None when ``MAX_ROUNDS`` passed without one):
    ``tools`` with ``tool_choice="auto"``, the assistant message and one ``tool`` message per
    call appended, until a reply calls nothing."""
    messages: list[dict] = [{"role": "user", "content": QUESTION}]
    rounds: list[list] = []
    with openai.OpenAI(
        base_url=f"{server.url}/v1/core", api_key=server.api_key, max_retries=0, timeout=300
    ) as client:
        for _ in range(MAX_ROUNDS):
            request = {
                "model": "core-1-mini-chat",
                "messages": messages,
                "tools": TOOLS,
                "tool_choice": "auto",
                "temperature": 0,
                "max_tokens": 96,
            }
            if stream:
                message = _folded(client.chat.completions.create(**request, stream=True))
            else:
                message = client.chat.completions.create(**request).choices[0].message
                message = message.model_dump(exclude_none=True)
            calls = message.get("tool_calls") or []
            rounds.append(
                [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
            )
            if not calls:
                return rounds, message.get("content")
            messages.append(message)
            for call in calls:
                run = TOOL_FUNCTIONS[call["function"]["name"]]
                result = run(**json.loads(call["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return rounds, None


def _folded(chunks) -> dict:
    """The assistant message a stream of chunks makes, as the SDK's docs fold it."""
    content, calls = "", {}
    for chunk in chunks:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for delta in choice.delta.tool_calls or ():
                call = calls.setdefault(
                    delta.index,
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = call["id"] or delta.id
                call["function"]["name"] += delta.function.name or ""
                call["function"]["arguments"] += delta.function.arguments or ""
    message: dict = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


@pytest.fixture(scope="module")
def chain_server():
    with running_server(offline_backend(ChainEngine(), profile="small")) as running:
        yield running


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
def test_the_sdk_loop_chains_two_dependent_calls_and_answers(chain_server, stream):
    rounds, answer = _loop(chain_server, stream)
    # one call a round, in order, the id from the first result; then the answer
    assert rounds == [[EXPECTED_CALLS[0]], [EXPECTED_CALLS[1]], []]
    assert answer == ANSWER


@pytest.mark.model
def test_on_the_small_model_the_sdk_loop_answers_from_a_result_without_repeating_it(real_server):
    rounds, answer = _loop(real_server)
    calls = [call for r in rounds for call in r]
    assert calls[:1] == EXPECTED_CALLS[:1]
    assert answer
