"""Three real agent loops over one backend, each run as its users run it:

* LangChain's ``create_agent`` over ``ChatCore``, with LangGraph's default recursion limit
  unless one is given (``GraphRecursionError`` is the limit reached);
* LlamaIndex's ``FunctionAgent`` over ``Core``, with its default 20 iterations (its
  ``WorkflowRuntimeError`` "Max iterations ... reached" is the limit reached);
* the loop an OpenAI-SDK user writes: ``chat`` with ``tools`` and ``tool_choice="auto"``, the
  assistant message and one ``tool`` message per call appended, until a reply calls nothing
  or 10 rounds have passed.

Each returns a ``Run``: the transcript, whether the limit was reached, the seconds taken and
a short record of every chat request the framework sent (its ``tool_choice``, the roles of
its messages, how many tools), read by a ``BackendProxy`` in front of the shared backend.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from backend.interface import AsyncChatStream, Backend, BackendProxy, ChatStream
from backend.protocol.catalogue import DEFAULT_CHAT_MODEL
from backend.protocol.schemas import ChatCompletion
from benchmarks.agents import world
from benchmarks.agents.scoring import Transcript

OPENAI_MAX_ROUNDS = 10


@dataclass
class Run:
    transcript: Transcript
    limit_reached: bool
    seconds: float
    requests: list[dict[str, Any]] = field(default_factory=list)


class RecordingBackend(BackendProxy):
    """Hands every call on, and notes what each chat request asked for."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.requests: list[dict[str, Any]] = []

    def take(self) -> list[dict[str, Any]]:
        """The requests noted since the last ``take``."""
        taken, self.requests = self.requests, []
        return taken

    def _note(self, request: Any, stream: bool) -> None:
        body = request if isinstance(request, Mapping) else request.model_dump(exclude_none=True)
        self.requests.append(
            {
                "stream": stream,
                "tool_choice": body.get("tool_choice"),
                "tools": len(body.get("tools") or []),
                "roles": [message["role"] for message in body.get("messages", [])],
                "temperature": body.get("temperature"),
                "parallel_tool_calls": body.get("parallel_tool_calls"),
            }
        )

    def chat(self, request: Any) -> ChatCompletion:
        self._note(request, stream=False)
        return self.inner.chat(request)

    def stream_chat(self, request: Any) -> ChatStream:
        self._note(request, stream=True)
        return self.inner.stream_chat(request)

    async def achat(self, request: Any) -> ChatCompletion:
        self._note(request, stream=False)
        return await self.inner.achat(request)

    async def astream_chat(self, request: Any) -> AsyncChatStream:
        self._note(request, stream=True)
        return await self.inner.astream_chat(request)


def run_langchain(
    task: dict[str, Any],
    backend: RecordingBackend,
    temperature: float,
    system_prompt: str | None = None,
    recursion_limit: int | None = None,
) -> Run:
    """``create_agent`` + ``invoke`` as LangChain's docs show it; the state is streamed so
    the calls made before a recursion limit are still read."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.errors import GraphRecursionError

    from langchain_core_ext import ChatCore

    model = ChatCore(backend=backend, temperature=temperature)
    agent = create_agent(
        model, tools=world.langchain_tools(task["tools"]), system_prompt=system_prompt
    )
    config = {} if recursion_limit is None else {"recursion_limit": recursion_limit}
    messages: list[Any] = []
    limit_reached = False
    start = time.perf_counter()
    try:
        inputs = {"messages": [HumanMessage(task["question"])]}
        for state in agent.stream(inputs, config=config, stream_mode="values"):
            messages = state["messages"]
    except GraphRecursionError:
        limit_reached = True
    seconds = time.perf_counter() - start
    transcript = Transcript()
    for message in messages:
        if isinstance(message, AIMessage):
            transcript.turns += 1
            transcript.calls += [(call["name"], call["args"]) for call in message.tool_calls]
    last = messages[-1] if messages else None
    if not limit_reached and isinstance(last, AIMessage) and not last.tool_calls:
        transcript.answer = last.text if hasattr(last, "text") else str(last.content)
    return Run(transcript, limit_reached, seconds, backend.take())


async def _run_llamaindex(task: dict[str, Any], backend: Backend, temperature: float) -> Run:
    from llama_index.core.agent.workflow import AgentOutput, FunctionAgent
    from workflows.errors import WorkflowRuntimeError

    from llamaindex_core_ext import Core

    agent = FunctionAgent(
        tools=world.llamaindex_tools(task["tools"]),
        llm=Core(backend=backend, temperature=temperature),
    )
    transcript = Transcript()
    limit_reached = False
    start = time.perf_counter()
    handler = agent.run(user_msg=task["question"])
    try:
        async for event in handler.stream_events():
            if isinstance(event, AgentOutput):  # one per model turn, with the calls it made
                transcript.turns += 1
                transcript.calls += [(c.tool_name, c.tool_kwargs) for c in event.tool_calls]
        result = await handler
        transcript.answer = str(result.response.content or "")
    except WorkflowRuntimeError as error:
        # LlamaIndex raises this one class for every workflow failure; only its message
        # tells the iteration limit from the rest.
        if "Max iterations" not in str(error):
            raise
        limit_reached = True
    return Run(transcript, limit_reached, time.perf_counter() - start)


def run_llamaindex(task: dict[str, Any], backend: RecordingBackend, temperature: float) -> Run:
    """``FunctionAgent(...).run(user_msg=...)`` awaited, its events read for each turn."""
    run = asyncio.run(_run_llamaindex(task, backend, temperature))
    run.requests = backend.take()
    return run


def run_openai(task: dict[str, Any], backend: RecordingBackend, temperature: float) -> Run:
    """The hand-written loop of an OpenAI-SDK user, on the backend's ``chat``."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task["question"]}]
    tools = world.openai_tools(task["tools"])
    transcript = Transcript()
    limit_reached = True
    start = time.perf_counter()
    for _ in range(OPENAI_MAX_ROUNDS):
        completion = backend.chat(
            {
                "model": DEFAULT_CHAT_MODEL,
                "messages": messages,
                "tools": tools,
                "tool_choice": "auto",
                "temperature": temperature,
            }
        )
        message = completion.choices[0].message
        transcript.turns += 1
        if not message.tool_calls:
            transcript.answer = message.content or ""
            limit_reached = False
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            try:
                args = json.loads(call.function.arguments)
                result = world.call(call.function.name, args)
            except json.JSONDecodeError:
                args, result = {"<unparsed>": call.function.arguments}, "invalid JSON arguments"
            transcript.calls.append((call.function.name, args))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return Run(transcript, limit_reached, time.perf_counter() - start, backend.take())


RUNNERS = {"langchain": run_langchain, "llamaindex": run_llamaindex, "openai": run_openai}
