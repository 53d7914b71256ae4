"""Continuous batching on one llama.cpp context: every running generation advances in one call.

On a CPU, decoding one token reads every weight of the model; decoding four tokens of four
conversations in the same call reads them once. A single thread (the runner) owns the llama.cpp
context and loops: admit waiting requests into free sequence slots, evaluate one prompt chunk,
then advance every running generation by one token in one batched ``llama_decode``, and hand
each new token to its request's queue (a generation with a draft, by as many tokens as its
choices keep of it: ``llamacpp_drafts``). A lone request runs exactly as it would alone.

Prompts are evaluated in chunks of at most ``PREFILL_CHUNK`` tokens, each in a call of its own,
cut where the prompt's own tokens say (``llamacpp_slots.chunk_ends``). A prompt's numbers
depend on the KV cells its tokens lie in: llama.cpp's CPU attention sums over the cache in
tiles of 64 cells and, for a lone decoded token, in one span per thread cut by the cache's used
extent, so the same prompt one cell further on reads other numbers, and the 4-bit kernels'
8-bit activations amplify that (benchmarks/README.md, "Same request, same answer"). Where a
prompt's cells lie is therefore never left to the engine's history: a request admitted while
nothing runs (a lone request, the first of a burst) starts from a cache laid out as a fresh
engine's, holding only the prefix it reuses, at cells 0 onwards (``_lay_out_alone``), so it
reads exactly what a fresh engine reads; the fresh prefixes the cache held are set aside for
later lone requests (``llamacpp_slots``). Only whole chunks that a lone request computed are
reused so (``Slot.fresh``). Requests admitted while others run share the cache with them and
read what their batch and their cells give, as in every batching server; with ``one_at_a_time``
every request runs alone, so none depends on another (``CORE_DETERMINISTIC``).

The KV cache is shared by all slots (llama.cpp's unified cache). When it fills up, idle slots'
cached prompts are dropped first, then the running request admitted last is set aside, to be
resumed from its prompt and the tokens it produced (vLLM's recompute preemption).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from backend.engines.llamacpp_batch import NativeBatch
from backend.engines.llamacpp_drafts import DraftChecking
from backend.engines.llamacpp_slots import (
    PREFILL_CHUNK,
    Slot,
    SlotCache,
    chunk_ends,
    next_end,
    reusable_prefix,
)
from backend.engines.llamacpp_suffix_scoring import SuffixScoring
from backend.engines.request_runner import END, RequestRunner, RunnerRequest, stop_asked

logger = logging.getLogger(__name__)

#: Tokens a generation may run ahead of its reader before it pauses.
MAX_UNREAD = 8
_READER_POLL_SECONDS = 0.002


@dataclass(eq=False)
class _Request(RunnerRequest):
    #: What is evaluated as a prompt when admitted: the prompt, and for a request resumed
    #: after preemption the tokens it had produced (the next token follows the last of them).
    evaluate: list[int] = field(default_factory=list)
    #: A scoring of several prompts that all begin with ``prompt``: what follows it in each.
    #: The prompt is evaluated once, then every suffix scored in one batched evaluation.
    suffixes: list[list[int]] | None = None
    #: Whether each suffix is scored with its hidden state (``score_suffixes(hidden=True)``).
    hidden: bool = False
    #: Where the chunks evaluating ``evaluate`` end (``llamacpp_slots.chunk_ends``).
    ends: list[int] = field(default_factory=list)
    #: A scoring cut before message starts as a generation is (``score_suffixes``).
    cut_as_generation: bool = False


class BatchingRunner(DraftChecking, SuffixScoring, RequestRunner):
    """Runs generations and scorings on one llama.cpp context, batching those that overlap.

    Args:
        ctx: a llama.cpp context created with ``n_seq_max`` >= ``slots`` and a unified KV
            cache of ``kv_cells`` cells; only the runner's thread uses it.
        n_vocab: the width of a row of logits.
        slots: how many requests run at once; further requests wait.
        kv_cells: the KV cache's size, shared by all slots.
        native: the llama.cpp API (the ``llama_cpp`` module; tests pass a stand-in).
        one_at_a_time: admit a request only when none runs, so that each one's numbers
            depend on nothing but itself.
        message_starts: the tokens a generation's prompt chunks also end before (the chat
            template's message openings, ``llamacpp_slots.chunk_ends``). Scorings are cut at
            whole chunks only unless they ask to be cut as a generation
            (``score_suffixes(cut_as_generation=True)``): the readings the judge and the
            tool-need check were tuned on stay as measured.
    """

    request_type = _Request

    def __init__(
        self,
        ctx,
        n_vocab: int,
        slots: int,
        kv_cells: int,
        native=None,
        suffix_sequences: int = 0,
        batch_tokens: int = PREFILL_CHUNK,
        one_at_a_time: bool = False,
        n_embd: int = 0,
        message_starts: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__("llama.cpp runner")
        if native is None:
            import llama_cpp as native

        self._native = native
        self._ctx = ctx
        self._memory = native.llama_get_memory(ctx)
        self._kv_cells = kv_cells
        self._cache = SlotCache(native, ctx, slots)
        self._slots = self._cache.slots
        #: Sequence ids after the slots', each holding one suffix of a shared-prefix scoring
        #: for the length of one evaluation (``_score_suffixes``).
        self._suffix_seqs = list(range(slots, slots + suffix_sequences))
        self._batch_tokens = max(PREFILL_CHUNK, slots, batch_tokens)
        self._batch = NativeBatch(native, ctx, self._batch_tokens, n_vocab, n_embd)
        #: The most requests advanced by one decode call so far (how much batching happened).
        self.largest_decode_batch = 0
        #: Requests set aside so far because the KV cache was full.
        self.preemptions = 0
        self._prefill_turn = True  # alternates a prompt chunk and a decode step
        self._one_at_a_time = one_at_a_time
        self._message_starts = message_starts
        #: The slot of a request admitted while nothing ran, while it still runs alone: what
        #: it evaluates lies where a fresh engine puts it.
        self._alone: Slot | None = None
        #: Requests laid out alone so far (each from a cache holding only what it reuses).
        self.fresh_layouts = 0
        self._start()

    def close(self) -> None:
        super().close()
        self._batch.free()

    # ------------------------------------------------------------------ the runner thread

    def _busy(self) -> bool:
        return bool(self._running())

    def _step(self) -> None:
        prefill_turn, self._prefill_turn = self._prefill_turn, not self._prefill_turn
        self._drop_finished()
        self._admit()
        prefilling = [s for s in self._running() if self._needs_prefill(s)]
        # A generation whose reader is MAX_UNREAD tokens behind waits for it (a slow client,
        # or one that has stopped reading after a stop sequence) instead of running ahead.
        decoding = [
            s
            for s in self._running()
            if not self._needs_prefill(s) and s.request.results.qsize() < MAX_UNREAD
        ]
        # Alternate a prompt chunk and a decode step, so that a long prompt does not stall
        # the streams already running, nor they it.
        if prefilling and (prefill_turn or not decoding):
            self._prefill_chunk(min(prefilling, key=lambda s: s.request.order))
        elif decoding:
            self._decode_step(decoding)
        else:  # every running generation waits for its reader
            with self._wake:
                self._wake.wait(_READER_POLL_SECONDS)

    def _fail_everything(self, error: BaseException) -> None:
        for slot in self._running():
            self._cache.truncate(slot, 0)
            self._finish(slot, error)
        for request in self._take_waiting():
            request.results.put(error)

    def _running(self) -> list[Slot]:
        return [slot for slot in self._slots if slot.request is not None]

    def _needs_prefill(self, slot: Slot) -> bool:
        return len(slot.cached) < len(slot.request.evaluate)

    def _drop_finished(self) -> None:
        """Free the slots of requests whose callers stopped reading or asked to stop."""
        self._drop_cancelled()
        for slot in self._running():
            if slot.request.score is None and stop_asked(slot.request):
                self._finish(slot)

    def _drop_cancelled(self) -> None:
        """Free the slots of generations whose callers closed them."""
        for slot in (s for s in self._running() if s.request.cancelled.is_set()):
            self._release(slot)

    def _admit(self) -> None:
        with self._wake:
            # Under the queue's lock: a close before a caller's next request is seen here.
            self._drop_cancelled()
            while self._waiting and self._waiting[0].cancelled.is_set():
                self._waiting.popleft()
            if not self._waiting:
                return
            free = [slot for slot in self._slots if slot.request is None]
            if not free:
                return
            running = self._running()
            if running and self._one_at_a_time:
                return
            request = self._waiting[0]
            request.evaluate = request.prompt + request.generated
            continued = request.score is None and request.continued_later
            cut_before = self._message_starts if continued or request.cut_as_generation else ()
            request.ends = chunk_ends(request.evaluate, request.apart, cut_before)
            needed = len(request.evaluate) + 1
            if self._cache.cells_in_use(exclude=free) + needed > self._kv_cells and running:
                return  # waits for a running request to finish (its cells to free)
            self._waiting.popleft()
        if running:
            slot = self._admit_beside(free, request, needed)
        else:
            slot = self._lay_out_alone(request)
        slot.request = request
        slot.last_used = request.order

    def _lay_out_alone(self, request: _Request) -> Slot:
        """A slot for a request that runs alone, in a cache laid out as a fresh engine's that
        holds only the prefix of its prompt the slots or the set-aside prefixes had."""
        slot = self._cache.lay_out_alone(request.evaluate, request.ends)
        self.fresh_layouts += 1
        self._alone = slot
        return slot

    def _admit_beside(self, free: list[Slot], request: _Request, needed: int) -> Slot:
        """A slot for a request admitted while others run, sharing what the cache holds."""
        self._alone = None  # the running request no longer has the cache to itself
        # Each slot's reusable prefix, worked out once (truncating the chosen slot to its own
        # prefix below changes none of them).
        reusable = {
            s.seq_id: reusable_prefix(s, request.evaluate, request.ends) for s in self._slots
        }
        slot = max(free, key=lambda s: (reusable[s.seq_id], -s.last_used))
        keep = reusable[slot.seq_id]
        self._cache.truncate(slot, keep)
        # Another slot may hold a longer prefix of this prompt (a groundedness context checked
        # against another claim, a conversation's system prompt): share its cells.
        donor = max(self._slots, key=lambda s: reusable[s.seq_id])
        shared = reusable[donor.seq_id]
        if shared > keep:
            self._cache.share(donor, slot, shared)
            keep = shared
        # Make room: drop other idle slots' caches, least recently used first.
        for idle in sorted(free, key=lambda s: s.last_used):
            if self._cache.cells_in_use() + needed - keep <= self._kv_cells:
                break
            if idle is not slot:
                self._cache.truncate(idle, 0)
        return slot

    def _prefill_chunk(self, slot: Slot) -> None:
        request = slot.request
        tokens = request.evaluate
        start = len(slot.cached)
        # Chunks end where the prompt's own tokens say (``chunk_ends``), so their shapes do
        # not depend on the cache.
        end = next_end(request.ends, start)
        chunk = tokens[start:end]
        last = end == len(tokens)
        entries = [(slot.seq_id, token, start + i, False) for i, token in enumerate(chunk)]
        if not self._evaluate(slot, entries, wants_logits=last):
            return
        self._cache.evaluated(slot, chunk, alone=slot is self._alone)
        if last:
            self._after_evaluation(slot, row=len(chunk) - 1)

    def _evaluate(self, slot: Slot, entries: list, wants_logits: bool) -> bool:
        """Evaluate ``entries`` of the slot's request once there is room for them. False
        when the request was set aside to make room, or failed (and was handed the error)."""
        self._make_room(len(entries))
        if slot.request is None:
            return False  # it was the one set aside
        try:
            self._batch.decode(entries, wants_logits=wants_logits)
        except BaseException as error:  # noqa: BLE001 - handed to the request
            self._cache.truncate(slot, 0)
            self._finish(slot, error)
            return False
        return True

    def _decode_step(self, slots: list[Slot]) -> None:
        slots = self._check_drafts(slots, alone=len(self._running()) == 1)
        self._make_room(len(slots))
        slots = [slot for slot in slots if slot.request is not None]
        if not slots:
            return
        entries = [
            (slot.seq_id, slot.request.generated[-1], len(slot.cached), True) for slot in slots
        ]
        try:
            self._batch.decode(entries, wants_logits=True)
        except BaseException as error:  # noqa: BLE001 - handed to the requests
            for slot in slots:
                self._cache.truncate(slot, 0)
                self._finish(slot, error)
            return
        self.largest_decode_batch = max(self.largest_decode_batch, len(slots))
        for row, slot in enumerate(slots):
            slot.cached.append(slot.request.generated[-1])
            self._after_evaluation(slot, row)

    def _make_room(self, cells: int) -> None:
        """Free ``cells`` KV cells: drop idle slots' caches (least recently used first), then
        set aside the newest running requests while more than one runs."""
        idle_slots = (s for s in self._slots if s.request is None)
        for idle in sorted(idle_slots, key=lambda s: s.last_used):
            if self._cache.cells_in_use() + cells <= self._kv_cells:
                return
            self._cache.truncate(idle, 0)
        while self._cache.cells_in_use() + cells > self._kv_cells and len(self._running()) > 1:
            self._preempt(max(self._running(), key=lambda s: s.request.order))

    def _preempt(self, slot: Slot) -> None:
        """Set a running request aside: its cache is dropped and it waits to be resumed."""
        request = slot.request
        logger.info("KV cache full: request %d set aside, to resume later", request.order)
        self.preemptions += 1
        self._cache.truncate(slot, 0)
        slot.request = None
        with self._wake:
            self._waiting.appendleft(request)

    def _after_evaluation(self, slot: Slot, row: int) -> None:
        """The request's logits at ``row`` are ready: score, or choose and hand on a token."""
        request = slot.request
        if request.suffixes is not None:
            self._score_suffixes(slot)
            return
        logits = self._batch.logits(row)
        try:
            if request.score is not None:
                request.results.put(request.score(logits))
                self._release(slot)
                return
            if request.cancelled.is_set() or stop_asked(request):
                self._finish(slot)
                return
            token = request.choose(logits)
        except BaseException as error:  # noqa: BLE001 - handed to the request
            self._finish(slot, error)
            return
        request.generated.append(token)
        request.results.put(token)
        if token in request.end_ids or len(request.generated) >= request.budget:
            self._finish(slot)

    def _finish(self, slot: Slot, error: BaseException | None = None) -> None:
        slot.request.results.put(error if error is not None else END)
        self._release(slot)

    def _release(self, slot: Slot) -> None:
        slot.request = None
