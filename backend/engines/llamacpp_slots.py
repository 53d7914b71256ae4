"""The llama.cpp runner's sequences, and what their KV cells hold: which prompt tokens each slot
has cached, which of them a new prompt may reuse, and the calls that drop, share or lay out
those cells (``backend.engines.llamacpp_runner`` decides when).

Every slot is a llama.cpp sequence in one unified KV cache. Sequences can share cells
(``llama_memory_seq_cp`` only marks them), so a prompt another slot holds is reused without
copying. Where a prompt's cells lie changes what it reads (``llamacpp_runner``), so a request
that runs alone gets the layout of a fresh engine: ``SlotCache.lay_out_alone``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Prompt tokens evaluated per call, and the granularity at which cached prompts are reused:
#: small enough that a shared prefix is reused to within this many tokens, large enough to
#: keep prompt evaluation near full speed (benchmarks/README.md).
PREFILL_CHUNK = 128


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
    request: Any = None
    last_used: int = 0


def reusable_prefix(slot: Slot, tokens: list[int], alone: bool = False) -> int:
    """Whole aligned chunks of ``slot``'s cache that ``tokens`` starts with, leaving at least
    the last token to evaluate (its logits choose the next token); for a request that will
    run alone, only chunks a fresh engine would have computed the same."""
    shared = 0
    usable = min(slot.reusable, slot.fresh) if alone else slot.reusable
    for cached, token in zip(slot.cached[:usable], tokens, strict=False):
        if cached != token:
            break
        shared += 1
    return min(shared, len(tokens) - 1) // PREFILL_CHUNK * PREFILL_CHUNK


class SlotCache:
    """The slots of one llama.cpp context and the calls that change what their cells hold.

    Args:
        native: the llama.cpp API (the ``llama_cpp`` module; tests pass a stand-in).
        ctx: the llama.cpp context.
        slots: how many sequences (slots) there are; their ids are 0 to ``slots - 1``.
    """

    def __init__(self, native, ctx, slots: int) -> None:
        self._native = native
        self._ctx = ctx
        self._memory = native.llama_get_memory(ctx)
        self.slots = [Slot(seq_id) for seq_id in range(slots)]

    def cells_in_use(self, exclude: Sequence[Slot] = ()) -> int:
        return sum(len(slot.cached) for slot in self.slots if slot not in exclude)

    def truncate(self, slot: Slot, keep: int) -> None:
        """Keep the first ``keep`` cached tokens of the slot; forget the rest (and anything a
        failed evaluation may have left beyond them)."""
        self._native.llama_memory_seq_rm(self._memory, slot.seq_id, keep, -1)
        del slot.cached[keep:]
        slot.reusable = min(slot.reusable, keep)
        slot.fresh = min(slot.fresh, keep)

    def share(self, donor: Slot, slot: Slot, count: int) -> None:
        """Empty ``slot`` and give it ``donor``'s first ``count`` cached tokens (whole
        reusable chunks), sharing their cells."""
        self.truncate(slot, 0)
        self._native.llama_memory_seq_cp(self._memory, donor.seq_id, slot.seq_id, 0, count)
        slot.cached, slot.reusable = list(donor.cached[:count]), count
        slot.fresh = min(count, donor.fresh)

    def lay_out_alone(self, donor: Slot, kept: list[int]) -> None:
        """Empty the cache but for ``kept``, the prefix ``donor`` holds (fresh, whole chunks),
        and put that back at cells 0 onwards, as a fresh engine that had evaluated just that
        prefix holds it: llama.cpp fills an emptied cache from its first cell.

        Raises:
            RuntimeError: llama.cpp could not put the prefix back.
        """
        keep = len(kept)
        saved = None
        if keep:
            self.truncate(donor, keep)
            size = self._native.llama_state_seq_get_size(self._ctx, donor.seq_id)
            saved = (ctypes.c_uint8 * size)()
            self._native.llama_state_seq_get_data(self._ctx, saved, size, donor.seq_id)
        self._native.llama_memory_clear(self._memory, False)
        for slot in self.slots:
            del slot.cached[:]
            slot.reusable = slot.fresh = 0
        if saved is not None:
            if not self._native.llama_state_seq_set_data(
                self._ctx, saved, len(saved), donor.seq_id
            ):
                raise RuntimeError("llama.cpp could not put a cached prefix back")
            donor.cached = list(kept)
            donor.reusable = donor.fresh = keep
