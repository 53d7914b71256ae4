"""``Core``: the service's chat models as a LlamaIndex ``FunctionCallingLLM``.

>>> from llamaindex_core_ext import Core
>>> llm = Core(temperature=0)                      # in-process, or CORE_BASE_URL's server
>>> llm.complete("Say hi").text
>>> for part in llm.stream_chat(messages): print(part.delta, end="")

Every call is one backend request: the HTTP client retries (``max_retries``), nothing here
does. Streams request ``include_usage``, so the last streamed response carries the token
usage as the non-streamed one does. Function calling works with every model name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.constants import DEFAULT_NUM_OUTPUTS, DEFAULT_TEMPERATURE
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection

from backend.protocol.catalogue import DEFAULT_CHAT_MODEL, find_model
from backend.protocol.errors import NotFoundError
from llamaindex_core_ext.connection import CoreConnection
from llamaindex_core_ext.messages import (
    chat_response,
    completion_response,
    resolve_tool_choice,
    to_core_messages,
    to_core_tool,
    tool_selections,
)
from llamaindex_core_ext.streaming import ChatStreamAssembler

if TYPE_CHECKING:
    from llama_index.core.tools.types import BaseTool

#: Context length of the spec's chat models (section 2.1), for names outside the catalogue.
DEFAULT_CONTEXT_WINDOW = 32768


def context_window(model: str) -> int:
    """The catalogue's context length of ``model``, or the chat models' for other names."""
    try:
        return find_model(model).context_length
    except NotFoundError:
        return DEFAULT_CONTEXT_WINDOW


class Core(CoreConnection, FunctionCallingLLM):
    """The service's chat completion (tools, streaming) as a LlamaIndex LLM.

    Args:
        model: chat model name (default ``core-1-mini-chat``).
        temperature: 0 to 2 (default LlamaIndex's 0.1; 0 is greedy).
        max_tokens: cap on generated tokens; None lets the model finish (up to the context).
        top_p: nucleus sampling mass in (0, 1]; None means the service default.
        logprobs: return each output token's log-probability (``ChatResponse.logprobs``, one
            list per token: its ``top_logprobs`` most likely tokens, or the token itself).
        top_logprobs: 0 to 20 alternatives per token, with ``logprobs``.
        additional_kwargs: extra request fields sent with every call (``stop``, ``seed``).
        timeout, max_retries, api_key, base_url, backend: see ``CoreConnection``.
    """

    model: str = Field(default=DEFAULT_CHAT_MODEL, description="The chat model to use.")
    temperature: float = Field(
        default=DEFAULT_TEMPERATURE, ge=0.0, le=2.0, description="Sampling temperature, 0 to 2."
    )
    max_tokens: int | None = Field(
        default=None, gt=0, description="Cap on generated tokens; None: up to the context."
    )
    top_p: float | None = Field(
        default=None, gt=0.0, le=1.0, description="Nucleus sampling mass; None: service default."
    )
    logprobs: bool | None = Field(
        default=None, description="Return the log-probability of each output token."
    )
    top_logprobs: int = Field(
        default=0, ge=0, le=20, description="Most likely tokens listed per position (logprobs)."
    )
    additional_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra request fields for every call (stop, seed)."
    )

    @classmethod
    def class_name(cls) -> str:
        return "Core_LLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=context_window(self.model),
            num_output=self.max_tokens or DEFAULT_NUM_OUTPUTS,
            is_chat_model=True,
            is_function_calling_model=True,
            model_name=self.model,
        )

    def _request(
        self, messages: Sequence[ChatMessage], stream: bool, **kwargs: Any
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": to_core_messages(messages),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            **({"logprobs": True, "top_logprobs": self.top_logprobs} if self.logprobs else {}),
            **self.additional_kwargs,
            **kwargs,
        }
        if stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        return {key: value for key, value in request.items() if value is not None}

    # ------------------------------------------------------------------ chat

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._chat(messages, **kwargs)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        return self._stream_chat(messages, **kwargs)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await self._achat(messages, **kwargs)

    @llm_chat_callback()
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        return await self._astream_chat(messages, **kwargs)

    def _chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return chat_response(self.get_backend().chat(self._request(messages, False, **kwargs)))

    def _stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        # Called now, so an invalid request raises here rather than on the first next().
        stream = self.get_backend().stream_chat(self._request(messages, True, **kwargs))

        def gen() -> ChatResponseGen:
            assembler = ChatStreamAssembler()
            with stream as chunks:
                for chunk in chunks:
                    yield assembler.add(chunk)

        return gen()

    async def _achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        completion = await self.get_backend().achat(self._request(messages, False, **kwargs))
        return chat_response(completion)

    async def _astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        stream = await self.get_backend().astream_chat(self._request(messages, True, **kwargs))

        async def gen() -> ChatResponseAsyncGen:
            assembler = ChatStreamAssembler()
            async with stream as chunks:
                async for chunk in chunks:
                    yield assembler.add(chunk)

        return gen()

    # ------------------------------------------------------------------ completion

    @staticmethod
    def _prompt_messages(prompt: str) -> list[ChatMessage]:
        return [ChatMessage(role=MessageRole.USER, content=prompt)]

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return completion_response(self._chat(self._prompt_messages(prompt), **kwargs))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        responses = self._stream_chat(self._prompt_messages(prompt), **kwargs)
        return (completion_response(response) for response in responses)

    @llm_completion_callback()
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return completion_response(await self._achat(self._prompt_messages(prompt), **kwargs))

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        responses = await self._astream_chat(self._prompt_messages(prompt), **kwargs)

        async def gen() -> CompletionResponseAsyncGen:
            async for response in responses:
                yield completion_response(response)

        return gen()

    # ------------------------------------------------------------------ tools

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[BaseTool],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The ``chat`` arguments for a call with tools: ``tool_required`` asks for
        ``tool_choice="required"``; a ``tool_choice`` naming a function forces it;
        ``allow_parallel_tool_calls`` is sent as ``parallel_tool_calls``, so a reply that may
        hold one call is generated as one (``FunctionAgent`` allows several by default)."""
        messages = list(chat_history or [])  # never the caller's list: it is their memory
        if isinstance(user_msg, str):
            user_msg = ChatMessage(role=MessageRole.USER, content=user_msg)
        if user_msg is not None:
            messages.append(user_msg)
        definitions = [to_core_tool(tool) for tool in tools]
        return {
            "messages": messages,
            "tools": definitions or None,
            "tool_choice": resolve_tool_choice(tool_choice, tool_required) if definitions else None,
            "parallel_tool_calls": allow_parallel_tool_calls if definitions else None,
            **kwargs,
        }

    def _validate_chat_with_tools_response(
        self,
        response: ChatResponse,
        tools: Sequence[BaseTool],
        allow_parallel_tool_calls: bool = False,
        **kwargs: Any,
    ) -> ChatResponse:
        """Keep only the first tool call unless parallel calls are allowed (LlamaIndex's
        ``force_single_tool_call``; the service, asked for one call, already sends one)."""
        if not allow_parallel_tool_calls:
            message = response.message
            first_call = next(
                (block for block in message.blocks if block.block_type == "tool_call"), None
            )
            if first_call is not None:
                message.blocks = [
                    block
                    for block in message.blocks
                    if block.block_type != "tool_call" or block is first_call
                ]
                calls = message.additional_kwargs.get("tool_calls")
                if calls:
                    message.additional_kwargs["tool_calls"] = calls[:1]
        return response

    def get_tool_calls_from_response(
        self,
        response: ChatResponse,
        error_on_no_tool_call: bool = True,
        **kwargs: Any,
    ) -> list[ToolSelection]:
        """The tool calls of a (possibly streamed) response.

        Raises:
            ValueError: there is none and ``error_on_no_tool_call`` is set.
        """
        selections = tool_selections(response.message)
        if not selections and error_on_no_tool_call:
            raise ValueError(
                "Expected at least one tool call, but the model answered with text: "
                f"{(response.message.content or '')[:200]!r}"
            )
        return selections
