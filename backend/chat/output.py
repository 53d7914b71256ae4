"""One post-processing path for generated tokens, shared by streaming and non-streaming.

The processor turns token ids into events (text deltas, tool calls, the finish) as they
arrive. A streamed response sends the events as chunks; a non-streamed response is the
events folded together, so under greedy decoding the concatenated stream equals the
non-streamed message by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.chat.tool_calls import opens_tool_call, parse_tool_calls
from backend.protocol.schemas import FinishReason, ToolCall


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallsFound:
    calls: list[ToolCall]


@dataclass(frozen=True)
class Finished:
    reason: FinishReason
    completion_tokens: int
    #: The prompt's tokens where only the model's answer tells them (an engine behind an
    #: API); None: the count the answer was prepared with.
    prompt_tokens: int | None = None


OutputEvent = TextDelta | ToolCallsFound | Finished


class IncrementalDetokenizer:
    """Decodes a growing list of token ids into text, a stable piece at a time.

    Decoding each token alone breaks multi-byte characters and the leading-space rules of
    SentencePiece tokenizers; like vLLM, we decode a short window that starts a few tokens
    back and emit only the new, complete suffix.
    """

    def __init__(self, tokenizer: object, context_ids: Sequence[int] = ()) -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = list(context_ids)
        self._prefix_offset = 0
        self._read_offset = len(self._ids)

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=True)  # type: ignore[attr-defined]

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        prefix_text = self._decode(self._ids[self._prefix_offset : self._read_offset])
        new_text = self._decode(self._ids[self._prefix_offset :])
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
            return new_text[len(prefix_text) :]
        return ""

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character at the very end)."""
        if self._read_offset == len(self._ids):
            return ""
        prefix_text = self._decode(self._ids[self._prefix_offset : self._read_offset])
        new_text = self._decode(self._ids[self._prefix_offset :])
        self._prefix_offset = self._read_offset = len(self._ids)
        return new_text[len(prefix_text) :]


def _held_stop_prefix(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that could begin a stop sequence."""
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:size]):
                longest = size
                break
    return longest


class OutputProcessor:
    """Consumes generated token ids; produces ``OutputEvent`` lists.

    Args:
        tokenizer: the model's Hugging Face tokenizer.
        eos_token_ids: tokens that end the turn (not part of the text).
        prompt_ids: the prompt, whose last tokens seed the detokenizer.
        stop: stop sequences; the text ends before the first one, which is not included.
        tool_names: the request's callable tools; empty when tools are off.
        prefill: text already placed in the assistant turn by the prompt (a forced tool
            call's opening); it is part of what is parsed, not of what is generated.
        parallel_calls: the output may hold several tool calls; else the first is kept.
    """

    def __init__(
        self,
        tokenizer: object,
        eos_token_ids: frozenset[int],
        prompt_ids: Sequence[int] = (),
        stop: Sequence[str] = (),
        tool_names: frozenset[str] = frozenset(),
        prefill: str = "",
        parallel_calls: bool = True,
    ) -> None:
        self._detok = IncrementalDetokenizer(tokenizer, prompt_ids[-6:])
        self._eos = eos_token_ids
        self._stops = list(stop)
        self._tool_names = tool_names
        self._prefill = prefill
        self._parallel_calls = parallel_calls
        self._text = ""  # generated text so far, cut at a stop sequence
        self._emitted = 0  # how much of _text went out as TextDelta
        self._holding_for_tools = bool(tool_names)
        self.completion_tokens = 0
        self.stopped = False  # a stop sequence or an end-of-turn token was reached
        self._done = False

    def feed(self, token_id: int) -> list[OutputEvent]:
        """Take one generated token; return the events it completes."""
        if self.stopped:
            return []
        self.completion_tokens += 1
        if token_id in self._eos:
            self.stopped = True
            return []
        self._add_text(self._detok.push(token_id))
        return self._release()

    def feed_text(self, piece: str) -> list[OutputEvent]:
        """Take generated text decoded elsewhere (an engine behind an API), counted as one
        token; return the events it completes."""
        if self.stopped or not piece:
            return []
        self.completion_tokens += 1
        self._add_text(piece)
        return self._release()

    def finish(self) -> list[OutputEvent]:
        """End of generation: flush held text, parse tool calls, and report the finish."""
        if self._done:
            return []
        self._done = True
        if not self.stopped:
            self._add_text(self._detok.flush())
        events: list[OutputEvent] = []
        if self._holding_for_tools:
            parsed = parse_tool_calls(
                self._prefill + self._text, self._tool_names, self._parallel_calls
            )
            if parsed.tool_calls:
                events.append(ToolCallsFound(parsed.tool_calls))
                self._emitted = len(self._text)
            self._holding_for_tools = False
        if self._emitted < len(self._text):
            events.append(TextDelta(self._text[self._emitted :]))
            self._emitted = len(self._text)
        events.append(Finished("stop" if self.stopped else "length", self.completion_tokens))
        return events

    def _add_text(self, piece: str) -> None:
        if not piece:
            return
        start = max(len(self._text) - max((len(s) for s in self._stops), default=0), 0)
        self._text += piece
        hits = [at for stop in self._stops if (at := self._text.find(stop, start)) != -1]
        if hits:
            self._text = self._text[: min(hits)]
            self.stopped = True

    def _release(self) -> list[OutputEvent]:
        if self._holding_for_tools:
            # Text that is, or may still become, a tool call is held back until the output is
            # complete: a call goes out as ``tool_calls``, never as content fragments.
            if opens_tool_call(self._prefill + self._text) is not False:
                return []
            self._holding_for_tools = False
        end = (
            len(self._text)
            if self.stopped
            else len(self._text) - _held_stop_prefix(self._text, self._stops)
        )
        if end <= self._emitted:
            return []
        delta = self._text[self._emitted : end]
        self._emitted = end
        return [TextDelta(delta)]
