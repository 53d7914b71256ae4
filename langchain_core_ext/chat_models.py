"""``ChatCore``: the service's chat models as a LangChain chat model.

The class stays thin: requests are built from the fields and call options, messages are
converted by the pure functions of ``langchain_core_ext.messages`` (tool choices by
``tool_choice``, token estimates by ``token_estimate``), and the work is done by a
``Backend`` (in-process or HTTP, see ``langchain_core_ext.connection``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from operator import itemgetter
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput, ModelProfile
from langchain_core.language_models.chat_models import BaseChatModel, LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.output_parsers.openai_tools import (
    JsonOutputKeyToolsParser,
    PydanticToolsParser,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.utils.pydantic import is_basemodel_subclass
from pydantic import BaseModel, ConfigDict, Field

from backend.protocol.catalogue import DEFAULT_CHAT_MODEL, find_model
from backend.protocol.errors import NotFoundError
from backend.protocol.schemas import ChatCompletion
from langchain_core_ext.connection import CoreConnection
from langchain_core_ext.messages import (
    MODEL_PROVIDER,
    chunk_to_generation,
    completion_to_message,
    messages_to_wire,
)
from langchain_core_ext.token_estimate import estimate_token_count
from langchain_core_ext.tool_choice import ToolChoiceLike, ToolLike, tool_choice_to_wire


class ChatCore(CoreConnection, BaseChatModel):
    """Chat completions with tools and streaming from the core service.

    Example:
        >>> from langchain_core_ext import ChatCore
        >>> llm = ChatCore(temperature=0, max_tokens=64)   # in-process, or CORE_BASE_URL
        >>> llm.invoke("Say hello.").content

    Args (besides the connection settings of ``CoreConnection``):
        model: a chat model name (spec 2.1); responses report the versioned name.
        temperature, max_tokens, top_p, stop: sampling settings (unset: the service's).
        logprobs, top_logprobs: return each output token's log-probability (and the
            ``top_logprobs`` most likely tokens at its position) in
            ``response_metadata["logprobs"]``, as ``ChatOpenAI`` does.
        streaming: make ``invoke`` stream internally (callbacks see every token).
        stream_usage: ask for usage on the last streamed chunk (default on).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

    model: str = Field(default=DEFAULT_CHAT_MODEL, description="Chat model name.")
    temperature: float | None = Field(default=None, description="0 to 2; unset means 0.7.")
    max_tokens: int | None = Field(default=None, description="Cap on generated tokens.")
    top_p: float | None = Field(default=None, description="Nucleus sampling mass in (0, 1].")
    stop: list[str] | None = Field(default=None, description="Up to 4 stop sequences.")
    logprobs: bool | None = Field(default=None, description="Return token log-probabilities.")
    top_logprobs: int | None = Field(
        default=None, description="0 to 20 most likely tokens per position; needs logprobs."
    )
    streaming: bool = Field(default=False, description="Stream internally on invoke.")
    stream_usage: bool = Field(default=True, description="Usage on the last streamed chunk.")

    # ------------------------------------------------------------------ LangChain metadata

    @property
    def _llm_type(self) -> str:
        return "core-chat"

    @classmethod
    def is_lc_serializable(cls) -> bool:
        # langchain-core's ``load`` revives only classes on its own allowlist, so a
        # constructor dump of this class could not be loaded back by default.
        return False

    @property
    def lc_secrets(self) -> dict[str, str]:
        return {"api_key": "CORE_API_KEY"}

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "stop": self.stop,
            "base_url": self.base_url,
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider=MODEL_PROVIDER,
            ls_model_name=kwargs.get("model") or self.model,
            ls_model_type="chat",
        )
        temperature = kwargs.get("temperature", self.temperature)
        if temperature is not None:
            params["ls_temperature"] = temperature
        max_tokens = kwargs.get("max_tokens", self.max_tokens)
        if max_tokens is not None:
            params["ls_max_tokens"] = max_tokens
        if stops := stop or kwargs.get("stop") or self.stop:
            params["ls_stop"] = list(stops)
        return params

    def _resolve_model_profile(self) -> ModelProfile | None:
        try:
            card = find_model(self.model)
        except NotFoundError:
            return None
        return ModelProfile(
            name=card.version,
            status=card.status,
            release_date=card.release_date.isoformat(),
            max_input_tokens=card.context_length,
            text_inputs=True,
            image_inputs=False,
            pdf_inputs=False,
            audio_inputs=False,
            video_inputs=False,
            text_outputs=True,
            tool_calling=True,
            tool_choice=True,
            tool_call_streaming=True,
        )

    # ------------------------------------------------------------------ requests

    def _request(
        self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any
    ) -> dict[str, Any]:
        """The JSON-shaped request: fields, then per-call options (``model`` included)."""
        kwargs.pop("stream", None)  # the backend method decides
        kwargs.pop("stream_usage", None)  # only meaningful when streaming (_stream_request)
        request: dict[str, Any] = {
            "model": kwargs.pop("model", None) or self.model,
            "messages": messages_to_wire(messages),
        }
        for name in ("temperature", "max_tokens", "top_p", "logprobs", "top_logprobs"):
            value = kwargs.pop(name, getattr(self, name))
            if value is not None:
                request[name] = value
        call_stop = kwargs.pop("stop", None)
        stops = next((s for s in (stop, call_stop, self.stop) if s is not None), None)
        if stops:
            request["stop"] = list(stops)
        request.update(kwargs)  # tools, tool_choice, seed... as the wire format names them
        return request

    def _stream_request(
        self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any
    ) -> dict[str, Any]:
        stream_usage = kwargs.pop("stream_usage", None)
        request = self._request(messages, stop, **kwargs)
        if self.stream_usage if stream_usage is None else stream_usage:
            request["stream_options"] = {"include_usage": True}
        return request

    @staticmethod
    def _chat_result(completion: ChatCompletion) -> ChatResult:
        message = completion_to_message(completion)
        choice = completion.choices[0]
        info: dict[str, Any] = {"finish_reason": choice.finish_reason}
        if choice.logprobs is not None:
            info["logprobs"] = choice.logprobs.model_dump()  # LangChain adds it to the metadata
        generation = ChatGeneration(message=message, generation_info=info)
        return ChatResult(
            generations=[generation],
            llm_output={
                "token_usage": completion.usage.model_dump(),
                "model_name": completion.model,
            },
        )

    # ------------------------------------------------------------------ calls

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        completion = self._get_backend().chat(self._request(messages, stop, **kwargs))
        return self._chat_result(completion)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        completion = await self._get_backend().achat(self._request(messages, stop, **kwargs))
        return self._chat_result(completion)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        request = self._stream_request(messages, stop, **kwargs)
        with self._get_backend().stream_chat(request) as chunks:
            for chunk in chunks:
                generation = chunk_to_generation(chunk)
                if run_manager:
                    run_manager.on_llm_new_token(generation.text, chunk=generation)
                yield generation

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        request = self._stream_request(messages, stop, **kwargs)
        async with await self._get_backend().astream_chat(request) as chunks:
            async for chunk in chunks:
                generation = chunk_to_generation(chunk)
                if run_manager:
                    await run_manager.on_llm_new_token(generation.text, chunk=generation)
                yield generation

    # ------------------------------------------------------------------ tools

    def bind_tools(
        self,
        tools: Sequence[ToolLike],
        *,
        tool_choice: ToolChoiceLike = None,
        strict: bool | None = None,
        parallel_tool_calls: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools (LangChain tools, pydantic models, functions or OpenAI tool dicts).

        Args:
            tools: converted with ``convert_to_openai_tool``.
            tool_choice: ``auto``, ``none``, ``any``/``required`` (some call), a tool name
                (that call), or ``True`` with a single tool (see ``tool_choice_to_wire``).
            strict: passed to ``convert_to_openai_tool``.
            parallel_tool_calls: sent as the request field (as ``ChatOpenAI`` does): False
                asks for at most one call a reply; None leaves the service's default (several
                allowed). Every call of a reply is in ``AIMessage.tool_calls``.
        """
        if parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = parallel_tool_calls
        formatted = [convert_to_openai_tool(t, strict=strict) for t in tools]
        wire_choice = tool_choice_to_wire(tool_choice, [t["function"]["name"] for t in formatted])
        if wire_choice is not None:
            kwargs["tool_choice"] = wire_choice
        return super().bind(tools=formatted, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        method: Literal["function_calling", "json_schema", "json_mode"] = "function_calling",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """A runnable returning ``schema`` instances (pydantic) or dicts (JSON schema,
        TypedDict).

        Methods: ``function_calling`` (default) forces a call of a tool made from the
        schema; ``json_schema`` sends the schema as ``response_format``, so the reply is JSON
        valid against it (grammar-constrained); ``json_mode`` sends ``{"type": "json_object"}``,
        so the reply is one JSON object, of a shape the prompt must describe. With
        ``include_raw`` the result is ``{"raw": AIMessage, "parsed": ..., "parsing_error": ...}``.
        """
        if kwargs:
            raise ValueError(f"unsupported arguments: {', '.join(kwargs)}")
        is_pydantic = isinstance(schema, type) and is_basemodel_subclass(schema)
        trace_format = {"kwargs": {"method": method, "strict": strict}, "schema": schema}
        parser: Runnable[Any, Any]
        if method == "function_calling":
            tool_name = convert_to_openai_tool(schema)["function"]["name"]
            llm = self.bind_tools(
                [schema],
                tool_choice=tool_name,
                strict=strict,
                ls_structured_output_format=trace_format,
            )
            if is_pydantic:
                parser = PydanticToolsParser(tools=[schema], first_tool_only=True)  # type: ignore[list-item]
            else:
                parser = JsonOutputKeyToolsParser(key_name=tool_name, first_tool_only=True)
        elif method in ("json_schema", "json_mode"):
            if method == "json_schema":
                function = convert_to_openai_tool(schema, strict=strict)["function"]
                json_schema = {"name": function["name"], "schema": function["parameters"]}
                if function.get("description"):
                    json_schema["description"] = function["description"]
                if strict is not None:
                    json_schema["strict"] = strict
                response_format = {"type": "json_schema", "json_schema": json_schema}
            else:
                response_format = {"type": "json_object"}
            llm = self.bind(
                response_format=response_format, ls_structured_output_format=trace_format
            )
            parser = (
                PydanticOutputParser(pydantic_object=schema) if is_pydantic else JsonOutputParser()
            )  # type: ignore[arg-type]
        else:
            raise ValueError(
                f"unknown method {method!r}; use function_calling, json_schema or json_mode"
            )
        if not include_raw:
            return llm | parser
        parsed = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
        )
        unparsed = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | parsed.with_fallbacks(
            [unparsed], exception_key="parsing_error"
        )

    # ------------------------------------------------------------------ token counting

    def get_token_ids(self, text: str) -> list[int]:
        """Token ids from the model's own tokenizer (in-process, or the server's
        ``/v1/core/tokenize``), else ``custom_get_token_ids``.

        Raises:
            NotImplementedError: the backend cannot count (a server in front of an engine, an
                engine backend) and there is no ``custom_get_token_ids``; LangChain's GPT-2
                fallback would need a download.
        """
        try:
            return self._get_backend().tokenize(text)
        except NotImplementedError:
            if self.custom_get_token_ids is not None:
                return self.custom_get_token_ids(text)
            raise NotImplementedError(
                "token ids need the chat model's tokenizer, which this backend cannot reach; pass "
                "custom_get_token_ids, or use get_num_tokens for an estimate"
            ) from None

    def get_num_tokens(self, text: str) -> int:
        """Exact with the model's tokenizer (in-process or the server's) or
        ``custom_get_token_ids``; else an offline estimate (``estimate_token_count``), never a
        tokenizer download."""
        try:
            return len(self.get_token_ids(text))
        except NotImplementedError:
            return estimate_token_count(text)

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """Prompt tokens of ``messages`` (and ``tools``).

        In-process and over HTTP (the server's ``/v1/core/tokenize``) this renders the prompt
        exactly as the service does, so it equals the ``input_tokens`` a call reports; where
        the backend cannot count, it is LangChain's per-message sum of ``get_num_tokens``.
        """
        request = {
            "model": self.model,
            "messages": messages_to_wire(messages),
            "tools": [convert_to_openai_tool(t) for t in tools] if tools else None,
        }
        try:
            return self._get_backend().count_prompt_tokens(request)
        except NotImplementedError:
            return super().get_num_tokens_from_messages(messages, tools)
