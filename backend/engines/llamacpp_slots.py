"""The llama.cpp runner's sequences, and what their KV cells hold: which prompt tokens each slot
has cached, which of them a new prompt may reuse, and the calls that drop, share or lay out
those cells (``backend.engines.llamacpp_runner`` decides when).

Every slot is a llama.cpp sequence in one unified KV cache. Sequences can share cells
(``llama_memory_seq_cp`` only marks them), so a prompt another slot holds is reused without
copying. Where a prompt's cells lie changes what it reads (``llamacpp_runner``), so a request
that runs alone gets the layout of a fresh engine: ``SlotCache.lay_out_alone``.

Laying the cache out anew empties it, so the fresh prefixes the slots held (a tools prompt, a
system prompt, a document under check) are first set aside in host memory, their cells
copied out (``llama_state_seq_get_data``), the least recently used dropped beyond
``SET_ASIDE_BYTES``. A lone request that starts with one gets it back at cells 0 onwards,
bit for bit what it was, as if it had stayed: an agent's tools prompt survives the lone
request that checks whether to call a tool.

A prompt evaluated whole (``Slot.prompt_end``) is also reused whole, past its last aligned
chunk, by a request that asks for its prompt to be evaluated apart (``apart``): a tool call
generated from the answer's prompt and the call's opening reads that prompt as the answer
did, and only the opening is evaluated.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Prompt tokens evaluated per call, and the granularity at which cached prompts are reused:
#: small enough that a shared prefix is reused to within this many tokens, large enough to
#: keep prompt evaluation near full speed (benchmarks/README.md).
PREFILL_CHUNK = 128

#: Host memory for fresh prefixes set aside when the cache is laid out anew: about 9,000
#: tokens of the default chat model (28 KB of keys and values a token), 20,000 of the small.
SET_ASIDE_BYTES = 256 * 2**20


@dataclass(eq=False)
class Slot:
    """A llama.cpp sequence id, the tokens its KV cache holds, and the request using it."""

    seq_id: int
    cached: list[int] = field(default_factory=list)
    #: Leading cached tokens computed in whole aligned prompt chunks: reusable by a new prompt.
    reusable: int = 0
    #: Leading cached tokens whose KV cells hold what a fresh engine computes for them: laid
    #: out from cell 0 by a request running alone. Only these are reused by a lone request.
    fresh: int = 0
    #: The length of the prompt last evaluated whole in this slot, in aligned chunks and one
    #: last chunk ending there (0: none): reused whole by a request evaluated apart there.
    prompt_end: int = 0
    request: Any = None
    last_used: int = 0


def reusable_prefix(slot: Slot, tokens: list[int], apart: int = 0) -> int:
    """Whole aligned chunks of ``slot``'s cache that ``tokens`` starts with, leaving at least
    the last token to evaluate (its logits choose the next token), for a request admitted
    beside others (a lone request is laid out by ``SlotCache.lay_out_alone``). With
    ``apart``, the slot's whole prompt of that length, where ``tokens`` begins with it."""
    return _reused(slot.cached, slot.reusable, slot.prompt_end, tokens, apart)


def _shared_with(prefix: Sequence[int], tokens: list[int], apart: int) -> int:
    """What a request for ``tokens`` (evaluated apart at ``apart``) reuses of a prefix set
    aside: whole aligned chunks, or all of it where it is the prompt evaluated apart (a
    prefix set aside that ends off a chunk's end is a whole prompt)."""
    return _reused(prefix, len(prefix), len(prefix), tokens, apart)


def _reused(
    cached: Sequence[int], reusable: int, prompt_end: int, tokens: list[int], apart: int
) -> int:
    """What ``tokens`` (evaluated apart at ``apart``) reuses of a cache holding ``cached``:
    the whole prompt evaluated there where it ends at ``apart``, else whole aligned chunks of
    its first ``reusable`` tokens."""
    if 0 < apart == prompt_end < len(tokens) and tuple(cached[:apart]) == tuple(tokens[:apart]):
        return apart
    return _up_to(apart, _whole_chunks_shared(cached[:reusable], tokens))


def _up_to(apart: int, reused: int) -> int:
    """``reused`` tokens, or whole chunks up to ``apart`` where they would run past it: the
    prompt before it is evaluated on its own, so no chunk spans it."""
    return _aligned(apart) if 0 < apart < reused else reused


def _whole_chunks_shared(cached: Sequence[int], tokens: list[int]) -> int:
    shared = 0
    for cached_token, token in zip(cached, tokens, strict=False):
        if cached_token != token:
            break
        shared += 1
    return min(shared, len(tokens) - 1) // PREFILL_CHUNK * PREFILL_CHUNK


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
        #: Fresh prefixes set aside (their tokens) and their cells' contents, least recently
        #: used first.
        self.set_aside: OrderedDict[tuple[int, ...], ctypes.Array] = OrderedDict()

    def cells_in_use(self, exclude: Sequence[Slot] = ()) -> int:
        return sum(len(slot.cached) for slot in self.slots if slot not in exclude)

    def truncate(self, slot: Slot, keep: int) -> None:
        """Keep the first ``keep`` cached tokens of the slot; forget the rest (and anything a
        failed evaluation may have left beyond them)."""
        self._native.llama_memory_seq_rm(self._memory, slot.seq_id, keep, -1)
        del slot.cached[keep:]
        slot.reusable = min(slot.reusable, keep)
        slot.fresh = min(slot.fresh, keep)
        if keep < slot.prompt_end:
            slot.prompt_end = 0

    def evaluated(self, slot: Slot, chunk: list[int], whole_prompt: bool, alone: bool) -> None:
        """Record ``chunk`` evaluated after the slot's cached tokens: ``whole_prompt``, it
        ends a prompt (or the part evaluated apart); ``alone``, by a request running alone."""
        start = len(slot.cached)
        end = start + len(chunk)
        slot.cached.extend(chunk)
        if slot.reusable == start:  # every chunk before it whole and aligned
            if whole_prompt:
                slot.prompt_end = end
            if end % PREFILL_CHUNK == 0:
                slot.reusable = end
        if alone and slot.fresh == start:
            slot.fresh = end

    def share(self, donor: Slot, slot: Slot, count: int) -> None:
        """Empty ``slot`` and give it ``donor``'s first ``count`` cached tokens (whole
        reusable chunks), sharing their cells."""
        self.truncate(slot, 0)
        self._native.llama_memory_seq_cp(self._memory, donor.seq_id, slot.seq_id, 0, count)
        slot.cached, slot.reusable = list(donor.cached[:count]), _aligned(count)
        slot.fresh = min(count, donor.fresh)
        slot.prompt_end = count if count == donor.prompt_end else 0

    def lay_out_alone(self, tokens: list[int], apart: int = 0) -> Slot:
        """Lay the cache out as a fresh engine's that had evaluated only the longest prefix of
        ``tokens`` found fresh in a slot or set aside (whole chunks), and return the slot
        holding it (cells 0 onwards), for a request that runs alone: llama.cpp fills an
        emptied cache from its first cell. The slots' fresh prefixes are set aside first.
        With ``apart``, a whole prompt of that length is found too (``reusable_prefix``).

        Raises:
            RuntimeError: llama.cpp could not put a prefix back.
        """
        for slot in sorted(self.slots, key=lambda s: s.last_used):
            self._set_aside(slot)
        self._native.llama_memory_clear(self._memory, False)
        for slot in self.slots:
            del slot.cached[:]
            slot.reusable = slot.fresh = 0
        # The slot used longest ago (a fresh engine's first request takes the first).
        slot = min(self.slots, key=lambda s: s.last_used)
        # The longest shared, the most recently used among equals.
        keep, found = max(
            ((_shared_with(prefix, tokens, apart), prefix) for prefix in reversed(self.set_aside)),
            key=lambda shared: shared[0],
            default=(0, ()),
        )
        if keep:
            self.set_aside.move_to_end(found)
            self._put_back(slot, found, self.set_aside[found])
            if keep < len(found):  # lay out just the shared part: copy it out and back
                self.truncate(slot, keep)
                cells = self._cells_of(slot.seq_id)
                self._native.llama_memory_clear(self._memory, False)
                self._put_back(slot, found[:keep], cells)
        while sum(len(c) for c in self.set_aside.values()) > self._set_aside_bytes:
            if len(self.set_aside) == 1:
                break
            self.set_aside.popitem(last=False)
        return slot

    def _set_aside(self, slot: Slot) -> None:
        fresh = min(slot.reusable, slot.fresh)
        if 0 < slot.prompt_end <= slot.fresh:
            fresh = max(fresh, slot.prompt_end)
        if not fresh:
            return
        prefix = tuple(slot.cached[:fresh])
        for kept in self.set_aside:
            # Already set aside, or more: a whole prompt only as itself (the cells of a longer
            # prefix were evaluated across its end).
            if kept[:fresh] == prefix and (len(kept) == fresh or _aligned(fresh) == fresh):
                self.set_aside.move_to_end(kept)
                return
        self.truncate(slot, fresh)
        self.set_aside[prefix] = self._cells_of(slot.seq_id)
        # A shorter prefix of this one is no longer needed: this one is laid out in its place.
        # Not a whole prompt shorter than it, which only it has.
        for shorter in [
            p
            for p in self.set_aside
            if len(p) < fresh and _aligned(len(p)) == len(p) and prefix[: len(p)] == p
        ]:
            del self.set_aside[shorter]

    def _cells_of(self, seq_id: int) -> ctypes.Array:
        size = self._native.llama_state_seq_get_size(self._ctx, seq_id)
        cells = (ctypes.c_uint8 * size)()
        self._native.llama_state_seq_get_data(self._ctx, cells, size, seq_id)
        return cells

    def _put_back(self, slot: Slot, prefix: Sequence[int], cells: ctypes.Array) -> None:
        if not self._native.llama_state_seq_set_data(self._ctx, cells, len(cells), slot.seq_id):
            raise RuntimeError("llama.cpp could not put a cached prefix back")
        slot.cached = list(prefix)
        slot.fresh = len(prefix)
        slot.reusable = _aligned(len(prefix))
        slot.prompt_end = 0 if slot.reusable == len(prefix) else len(prefix)


def _aligned(count: int) -> int:
    """``count`` tokens rounded down to whole chunks."""
    return count // PREFILL_CHUNK * PREFILL_CHUNK
