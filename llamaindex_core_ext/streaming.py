"""Folding the service's stream of chunks into LlamaIndex's streamed ``ChatResponse``s.

LlamaIndex wants each streamed response to carry the whole message so far plus the new text
in ``delta``. Tool calls arrive as OpenAI-style fragments keyed by ``index``; the message is
rebuilt from them with the same ``assistant_message`` the non-streamed path uses, so the last
streamed message equals the non-streamed one. The usage chunk (empty ``choices``) that ends a
stream requested with ``include_usage`` puts the token counts into ``additional_kwargs``. With
``logprobs`` asked, each response carries the entries of the tokens so far.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.base.llms.types import ChatResponse

from backend.protocol.schemas import (
    ChatCompletionChunk,
    FunctionCall,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
)
from llamaindex_core_ext.messages import assistant_message, token_logprobs, usage_kwargs


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""

    def add(self, fragment: ToolCallDelta) -> None:
        if fragment.id:
            self.id = fragment.id
        self.name += fragment.function.name or ""
        self.arguments += fragment.function.arguments or ""

    def as_call(self) -> ToolCall:
        return ToolCall(id=self.id, function=FunctionCall(name=self.name, arguments=self.arguments))


class ChatStreamAssembler:
    """Turns each chunk of one stream into the cumulative ``ChatResponse`` so far."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._usage: dict[str, int] = {}
        self._logprobs: list[TokenLogprob] | None = None

    def add(self, chunk: ChatCompletionChunk) -> ChatResponse:
        delta_text = ""
        if chunk.choices:
            delta = chunk.choices[0].delta
            delta_text = delta.content or ""
            self._text.append(delta_text)
            for fragment in delta.tool_calls or ():
                self._calls.setdefault(fragment.index, _PartialCall()).add(fragment)
            if chunk.choices[0].logprobs is not None:
                self._logprobs = (self._logprobs or []) + (chunk.choices[0].logprobs.content or [])
        if chunk.usage is not None:
            self._usage = usage_kwargs(chunk.usage)
        calls = [self._calls[index].as_call() for index in sorted(self._calls)]
        return ChatResponse(
            message=assistant_message("".join(self._text), calls),
            delta=delta_text,
            raw=chunk,
            additional_kwargs=dict(self._usage),
            logprobs=token_logprobs(self._logprobs),
        )
