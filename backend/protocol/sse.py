"""Server-sent events, both sides of the wire: encoding on the server, decoding on the client.

The decoder follows the WHATWG event-stream rules that matter for data-only streams: lines end
with CRLF, LF or CR; ``:`` starts a comment (keep-alives); ``data`` lines of one event are
joined with newlines; a blank line dispatches the event. ``event``, ``id`` and ``retry`` are
parsed and kept, though this service sends data-only events.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass

#: The last event of a successful chat stream (OpenAI's convention).
DONE = "[DONE]"
#: A comment line: ignored by decoders, keeps proxies and idle timeouts from closing the stream.
KEEP_ALIVE = b": keep-alive\n\n"


def encode_event(data: str) -> bytes:
    """One data-only event; multi-line data becomes several ``data:`` lines."""
    return "".join(f"data: {line}\n" for line in data.split("\n")).encode("utf-8") + b"\n"


@dataclass(frozen=True)
class ServerSentEvent:
    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed it text lines (without their line ends); it returns an event on each blank line."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    def decode(self, line: str) -> ServerSentEvent | None:
        if not line:
            if not self._data and self._event is None and self._id is None:
                return None
            event = ServerSentEvent("\n".join(self._data), self._event, self._id, self._retry)
            self._data, self._event, self._retry = [], None, None
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        elif field == "retry" and value.isdigit():
            self._retry = int(value)
        return None


class _EventParser:
    """Bytes in, complete events out; lines may be split anywhere across chunks.

    An event cut off by the end of the stream (no closing blank line) is dropped, as the
    event-stream rules say.
    """

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._decoder = SSEDecoder()
        self._buffer = ""
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        text = self._text.decode(chunk)
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split across two chunks
        if text:
            self._pending_cr = text.endswith("\r")
        lines = (self._buffer + text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._buffer = lines.pop()
        events = (self._decoder.decode(line) for line in lines)
        return [event for event in events if event is not None]


def iter_events(byte_chunks: Iterable[bytes]) -> Iterator[ServerSentEvent]:
    """Decode events from raw response bytes (e.g. ``httpx.Response.iter_bytes()``)."""
    parser = _EventParser()
    for chunk in byte_chunks:
        yield from parser.feed(chunk)


async def aiter_events(byte_chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """The async twin of ``iter_events``."""
    parser = _EventParser()
    async for chunk in byte_chunks:
        for event in parser.feed(chunk):
            yield event
