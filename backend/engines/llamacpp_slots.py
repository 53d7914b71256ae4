"""The llama.cpp runner's sequences, and what their KV cells hold: which prompt tokens each slot
has cached, which of them a new prompt may reuse, and the calls that drop, share or lay out
those cells (``backend.engines.llamacpp_runner`` decides when).

Every slot is a llama.cpp sequence in one unified KV cache. Sequences can share cells
(``llama_memory_seq_cp`` only marks them), so a prompt another slot holds is reused without
copying. Where a prompt's cells lie changes what it reads (``llamacpp_runner``), so a request
that runs alone gets the layout of a fresh engine: ``SlotCache.lay_out_alone``.

A prompt's numbers also depend on how it was cut into chunks, so each prompt is cut by its
own tokens alone (``chunk_ends``) and a cached prefix is reused only up to a point where the
new prompt's chunks and the cached ones have ended alike: the cells then hold what
evaluating the new prompt would put there. Chunks end at multiples of ``PREFILL_CHUNK``, at
the point a prompt is evaluated apart (a tool call generated from the answer's prompt and
the call's opening reads that prompt as the answer did, and only the opening is evaluated),
and, for generations a later request may continue (``SamplingParams.continued_later``; and a
scoring read just before one, the chain-state reading), before every message's first token:
a conversation's next request reuses every message up to the reply it adds, not only whole
128-token chunks (an agent's step after a tool result evaluates the call and the result,
benchmarks/README.md).

Laying the cache out anew empties it, so the fresh prefixes the slots held (a tools prompt, a
system prompt, a document under check) are first set aside in host memory, their cells
copied out (``llama_state_seq_get_data``), the least recently used dropped beyond
``SET_ASIDE_BYTES``. A lone request that starts with one gets it back at cells 0 onwards,
bit for bit what it was, as if it had stayed: an agent's tools prompt survives the lone
request that checks whether to call a tool.
"""

from __future__ import annotations

import bisect
import ctypes
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Prompt tokens evaluated per call at most, and where chunks end between message starts:
#: large enough to keep prompt evaluation near full speed (benchmarks/README.md).
PREFILL_CHUNK = 128

#: Host memory for fresh prefixes set aside when the cache is laid out anew: about 9,000
#: tokens of the default chat model (28 KB of keys and values a token), 20,000 of the small.
SET_ASIDE_BYTES = 256 * 2**20


def chunk_ends(
    tokens: Sequence[int], apart: int = 0, cut_before: Collection[int] = ()
) -> list[int]:
    """Where the chunks that evaluate ``tokens`` as a prompt end, in order: at multiples of
    ``PREFILL_CHUNK``, before every token in ``cut_before`` (a message's first token), at
    ``apart`` and at the prompt's end. Inside a prefix two prompts share (and not at ``apart``
    or an end), they are cut alike: the cuts there follow from the shared tokens alone."""
    count = len(tokens)
    ends = set(range(PREFILL_CHUNK, count, PREFILL_CHUNK))
    if cut_before:
        ends.update(i for i in range(1, count) if tokens[i] in cut_before)
    if 0 < apart < count:
        ends.add(apart)
    if count:
        ends.add(count)
    return sorted(ends)


def next_end(ends: list[int], start: int) -> int:
    """The first of ``ends`` after ``start``: where the chunk evaluated from there ends."""
    return ends[bisect.bisect_right(ends, start)]


@dataclass(eq=False)
class Slot:
    """A llama.cpp sequence id, the tokens its KV cache holds, and the request using it."""

    seq_id: int
    cached: list[int] = field(default_factory=list)
    #: Where the chunks that computed the leading cached tokens ended, from token 0 on, each
    #: chunk evaluated as part of a prompt (``chunk_ends``); generated tokens are not in them.
    ends: list[int] = field(default_factory=list)
    #: Leading cached tokens whose KV cells hold what a fresh engine computes for them: laid
    #: out from cell 0 by a request running alone. Only these are reused by a lone request.
    fresh: int = 0
    request: Any = None
    last_used: int = 0


@dataclass(eq=False)
class _SetAside:
    """A fresh prefix's cells copied out to host memory, and where its chunks ended."""

    cells: ctypes.Array
    ends: tuple[int, ...]


def reusable_prefix(slot: Slot, tokens: list[int], ends: list[int]) -> int:
    """How many of ``tokens`` (to be cut at ``ends``) reuse ``slot``'s cells, for a request
    admitted beside others (a lone request is laid out by ``SlotCache.lay_out_alone``)."""
    return _reused(slot.cached, slot.ends, tokens, ends)


def _reused(
    cached: Sequence[int], cached_ends: Sequence[int], tokens: list[int], ends: list[int]
) -> int:
    """The longest prefix of ``tokens`` that a cache holding ``cached`` (computed in chunks
    ending at ``cached_ends``) holds as evaluating ``tokens`` in chunks ending at ``ends``
    would: the same tokens, cut alike. At least the last token is left to evaluate (its
    logits choose the next token)."""
    limit = len(tokens) - 1
    reused = 0
    for cached_end, end in zip(cached_ends, ends, strict=False):
        if cached_end != end or end > limit:
            break
        if tuple(cached[reused:end]) != tuple(tokens[reused:end]):
            break
        reused = end
    return reused


def _holds(
    longer: Sequence[int], longer_ends: Sequence[int], prefix: Sequence[int], ends: Sequence[int]
) -> bool:
    """Whether a prefix set aside as ``longer`` (cut at ``longer_ends``) holds ``prefix`` (cut
    at ``ends``) as it was evaluated: the same tokens, cut alike up to its end."""
    cut_alike = tuple(e for e in longer_ends if e <= len(prefix)) == tuple(ends)
    return (
        cut_alike
        and bool(ends)
        and ends[-1] == len(prefix)
        and (tuple(longer[: len(prefix)]) == tuple(prefix))
    )


class SlotCache:
    """The slots of one llama.cpp context and the calls that change what their cells hold.

    Args:
        native: the llama.cpp API (the ``llama_cpp`` module; tests pass a stand-in).
        ctx: the llama.cpp context.
        slots: how many sequences (slots) there are; their ids are 0 to ``slots - 1``.
        set_aside_bytes: host memory for fresh prefixes set aside (``SET_ASIDE_BYTES``).
    """

    def __init__(self, native, ctx, slots: int, set_aside_bytes: int = SET_ASIDE_BYTES) -> None:
        self._native = native
        self._ctx = ctx
        self._memory = native.llama_get_memory(ctx)
        self.slots = [Slot(seq_id) for seq_id in range(slots)]
        self._set_aside_bytes = set_aside_bytes
        #: Fresh prefixes set aside (their tokens), their cells' contents and chunk ends,
        #: least recently used first.
        self.set_aside: OrderedDict[tuple[int, ...], _SetAside] = OrderedDict()

    def cells_in_use(self, exclude: Sequence[Slot] = ()) -> int:
        return sum(len(slot.cached) for slot in self.slots if slot not in exclude)

    def truncate(self, slot: Slot, keep: int) -> None:
        """Keep the first ``keep`` cached tokens of the slot; forget the rest (and anything a
        failed evaluation may have left beyond them)."""
        self._native.llama_memory_seq_rm(self._memory, slot.seq_id, keep, -1)
        del slot.cached[keep:]
        slot.ends = [end for end in slot.ends if end <= keep]
        slot.fresh = min(slot.fresh, keep)

    def evaluated(self, slot: Slot, chunk: list[int], alone: bool) -> None:
        """Record ``chunk`` of a prompt evaluated after the slot's cached tokens; ``alone``,
        by a request running alone."""
        start = len(slot.cached)
        end = start + len(chunk)
        slot.cached.extend(chunk)
        if (slot.ends[-1] if slot.ends else 0) == start:  # every token before it in chunks
            slot.ends.append(end)
        if alone and slot.fresh == start:
            slot.fresh = end

    def share(self, donor: Slot, slot: Slot, count: int) -> None:
        """Empty ``slot`` and give it ``donor``'s first ``count`` cached tokens (whole
        chunks, ``reusable_prefix``), sharing their cells."""
        self.truncate(slot, 0)
        self._native.llama_memory_seq_cp(self._memory, donor.seq_id, slot.seq_id, 0, count)
        slot.cached = list(donor.cached[:count])
        slot.ends = [end for end in donor.ends if end <= count]
        slot.fresh = min(count, donor.fresh)

    def lay_out_alone(self, tokens: list[int], ends: list[int]) -> Slot:
        """Lay the cache out as a fresh engine's that had evaluated only the longest prefix of
        ``tokens`` (to be cut at ``ends``) found fresh in a slot or set aside, and return the
        slot holding it (cells 0 onwards), for a request that runs alone: llama.cpp fills an
        emptied cache from its first cell. The slots' fresh prefixes are set aside first.

        Raises:
            RuntimeError: llama.cpp could not put a prefix back.
        """
        for slot in sorted(self.slots, key=lambda s: s.last_used):
            self._set_aside(slot)
        self._native.llama_memory_clear(self._memory, False)
        for slot in self.slots:
            del slot.cached[:]
            slot.ends, slot.fresh = [], 0
        # The slot used longest ago (a fresh engine's first request takes the first).
        slot = min(self.slots, key=lambda s: s.last_used)
        # The longest shared, the most recently used among equals.
        keep, found = max(
            (
                (_reused(prefix, aside.ends, tokens, ends), prefix)
                for prefix, aside in reversed(self.set_aside.items())
            ),
            key=lambda shared: shared[0],
            default=(0, ()),
        )
        if keep:
            self.set_aside.move_to_end(found)
            self._put_back(slot, found, self.set_aside[found])
            if keep < len(found):  # lay out just the shared part: copy it out and back
                self.truncate(slot, keep)
                shared = _SetAside(self._cells_of(slot.seq_id), tuple(slot.ends))
                self._native.llama_memory_clear(self._memory, False)
                self._put_back(slot, found[:keep], shared)
        while sum(len(aside.cells) for aside in self.set_aside.values()) > self._set_aside_bytes:
            if len(self.set_aside) == 1:
                break
            self.set_aside.popitem(last=False)
        return slot

    def _set_aside(self, slot: Slot) -> None:
        fresh = max((end for end in slot.ends if end <= slot.fresh), default=0)
        if not fresh:
            return
        prefix = tuple(slot.cached[:fresh])
        ends = tuple(end for end in slot.ends if end <= fresh)
        for kept, aside in self.set_aside.items():
            if _holds(kept, aside.ends, prefix, ends):  # already set aside, or more
                self.set_aside.move_to_end(kept)
                return
        self.truncate(slot, fresh)
        self.set_aside[prefix] = _SetAside(self._cells_of(slot.seq_id), ends)
        # A shorter prefix this one holds is no longer needed: this one is laid out instead.
        for shorter in [
            p
            for p, aside in self.set_aside.items()
            if len(p) < fresh and _holds(prefix, ends, p, aside.ends)
        ]:
            del self.set_aside[shorter]

    def _cells_of(self, seq_id: int) -> ctypes.Array:
        size = self._native.llama_state_seq_get_size(self._ctx, seq_id)
        cells = (ctypes.c_uint8 * size)()
        self._native.llama_state_seq_get_data(self._ctx, cells, size, seq_id)
        return cells

    def _put_back(self, slot: Slot, prefix: Sequence[int], aside: _SetAside) -> None:
        cells = aside.cells
        if not self._native.llama_state_seq_set_data(self._ctx, cells, len(cells), slot.seq_id):
            raise RuntimeError("llama.cpp could not put a cached prefix back")
        slot.cached = list(prefix)
        slot.fresh = len(prefix)
        slot.ends = list(aside.ends)
