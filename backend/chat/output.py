"""One post-processing path for generated tokens, shared by streaming and non-streaming.

The processor turns token ids into events (text deltas, tool calls, the finish) as they
arrive. A streamed response sends the events as chunks; a non-streamed response is the
events folded together, so under greedy decoding the concatenated stream equals the
non-streamed message by construction.

When a request asks for logprobs, every event carries the log-probability entries of the
tokens behind it: a text delta those of the tokens whose text it completes (a token whose
text is still held back, for a possible stop sequence or tool call, waits for the delta that
releases it), a tool call those of every token generated for it (as vLLM), the finish those
of last tokens that added no text (special tokens). The end-of-turn token has no entry, and
tokens whose text a stop sequence cuts are not sent: the entries spell the answer sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from backend.chat.tool_calls import MAX_CALLS, opens_tool_call, parse_tool_calls
from backend.engines.json_bounds import JSONBounds, reached_bound
from backend.protocol.schemas import FinishReason, TokenLogprob, ToolCall

#: The log-probability entries of the tokens behind an event (empty unless asked for).
Logprobs = tuple[TokenLogprob, ...]


@dataclass(frozen=True)
class TextDelta:
    text: str
    logprobs: Logprobs = ()


@dataclass(frozen=True)
class ToolCallsFound:
    calls: list[ToolCall]
    logprobs: Logprobs = ()


@dataclass(frozen=True)
class Finished:
    reason: FinishReason
    completion_tokens: int
    #: The prompt's tokens where only the model's answer tells them (an engine behind an
    #: API); None: the count the answer was prepared with.
    prompt_tokens: int | None = None
    logprobs: Logprobs = ()


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


@dataclass
class _PendingEntry:
    """A token's entry, not yet sent; ``end``: where its text ends in the generated text
    (None while the detokenizer still holds its text back)."""

    entry: TokenLogprob
    end: int | None = None


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
        logprobs: with logprobs asked, turns a generated token into its entry
            (``backend.chat.logprobs.TokenLogprobsReader``); None: events carry none.
        json_bounds: the bounds of output generated under a JSON constraint: one that
            reached them finishes with "length", like one cut by ``max_tokens``.
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
        logprobs: Callable[[int], TokenLogprob] | None = None,
        json_bounds: JSONBounds | None = None,
        parallel_calls: bool = True,
    ) -> None:
        self._detok = IncrementalDetokenizer(tokenizer, prompt_ids[-6:])
        self._eos = eos_token_ids
        self._stops = list(stop)
        self._tool_names = tool_names
        self._prefill = prefill
        self._json_bounds = json_bounds
        self._parallel_calls = parallel_calls
        self._text = ""  # generated text so far, cut at a stop sequence
        self._emitted = 0  # how much of _text went out as TextDelta
        self._holding_for_tools = bool(tool_names)
        self._describe = logprobs
        self._pending: list[_PendingEntry] = []
        self._produced = 0  # length of the generated text, before any stop-sequence cut
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
        if self._describe is not None:
            self._pending.append(_PendingEntry(self._describe(token_id)))
        self._add_text(self._detok.push(token_id))
        return self._release()

    def feed_text(self, piece: str, logprobs: Iterable[TokenLogprob] = ()) -> list[OutputEvent]:
        """Take generated text decoded elsewhere (an engine behind an API), counted as one
        token, with the entries of the tokens behind it; return the events it completes."""
        entries = [_PendingEntry(entry, None if piece else self._produced) for entry in logprobs]
        if self.stopped or not (piece or entries):
            return []
        self._pending.extend(entries)
        if piece:
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
        for pending in self._pending:  # tokens that added no text
            pending.end = self._produced if pending.end is None else pending.end
        end = len(self._text)
        events: list[OutputEvent] = []
        if self._holding_for_tools:
            parsed = parse_tool_calls(
                self._prefill + self._text, self._tool_names, self._parallel_calls
            )
            if parsed.tool_calls:
                # A call array wound up at its bound can hold one call more, written as short
                # as the schema allows, when the token that closed the last call opened it.
                calls = parsed.tool_calls[:MAX_CALLS]
                events.append(ToolCallsFound(calls, self._entries_until(end)))
                self._emitted = end
            self._holding_for_tools = False
        if self._emitted < end:
            events.append(TextDelta(self._text[self._emitted :], self._entries_until(end)))
            self._emitted = end
        events.append(
            Finished(
                self._finish_reason(), self.completion_tokens, logprobs=self._entries_until(end)
            )
        )
        self._pending.clear()  # what is left was cut by a stop sequence
        return events

    def _entries_until(self, end: int) -> Logprobs:
        """Take the pending entries of the tokens whose text ends by ``end``."""
        ready = 0
        for pending in self._pending:
            if pending.end is None or pending.end > end:
                break
            ready += 1
        taken, self._pending = self._pending[:ready], self._pending[ready:]
        return tuple(pending.entry for pending in taken)

    def _finish_reason(self) -> FinishReason:
        if not self.stopped:
            return "length"
        if self._json_bounds is not None and reached_bound(self._text, self._json_bounds):
            return "length"
        return "stop"

    def _add_text(self, piece: str) -> None:
        if not piece:
            return
        self._produced += len(piece)
        for pending in reversed(self._pending):  # the unplaced ones are the last
            if pending.end is not None:
                break
            pending.end = self._produced
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
        return [TextDelta(delta, self._entries_until(end))]
