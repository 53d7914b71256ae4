"""Continuous batching over a static slot cache: waiting prompts prefilled together, one decode
step for every running generation, captured as a CUDA graph on a GPU (``CORE_CUDA_GRAPHS``).

The default runner (``backend.engines.transformers_runner``) keeps a ``DynamicCache`` that it
pads, concatenates and cuts as generations come and go, admits one new prompt per step, and
launches every kernel of a step from Python. On a GPU that costs about 16 ms a step whatever the
batch (issue 34's measurements on an H200, in benchmarks/README.md). This runner instead:

- keeps every generation's keys and values in its own slot of a ``SlotCache`` allocated once,
  so a decode step's tensors never move;
- prefills every waiting prompt that fits (a free slot each, ``PREFILL_STEP_TOKENS`` tokens at
  most per step, at least one prompt) in one forward pass, the prompts packed into one sequence
  under a block-diagonal causal mask, so 64 prompts arriving together get their first tokens
  from the same pass instead of one per decode step;
- on CUDA, captures the decode step once per batch size in ``CAPTURED_SIZES`` (a batch pads up
  to the next), when it starts, over the whole slot length, and replays it; elsewhere it runs
  the same step eagerly over the columns in use.

Tokens are chosen per request by the same ``choose`` as the other runners (greedy, seeded,
constrained), and scorings (the judge) are served exactly as by ``TransformersRunner``, from
their own prompt tree. Greedy tokens equal the default runner's in float32 (tested on CPU).
"""

from __future__ import annotations

import logging
import time

import torch

from backend.engines.request_runner import END, stop_asked
from backend.engines.slot_cache import SlotCache
from backend.engines.transformers_runner import TransformersRunner, _Request

#: Most prompt tokens one prefill pass evaluates (a longer prompt goes alone): 64 chat
#: prompts of a short question each (35 tokens with the template) fit in one pass.
PREFILL_STEP_TOKENS = 4096
#: When nothing runs, how long the runner waits for the waiting queue to stop growing before
#: a prefill (seconds of quiet, and the most it waits in all): a burst of requests from many
#: threads arrives over a few milliseconds (Python hands the interpreter between threads every
#: 5 ms), and prefilling its first arrival alone would make the rest wait for that pass.
ARRIVAL_QUIET_S = 0.01
ARRIVAL_WAIT_S = 0.05
#: Batch sizes whose decode step is captured as a CUDA graph; a batch pads up to the next.
CAPTURED_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)

logger = logging.getLogger(__name__)


class SlotRunner(TransformersRunner):
    """Runs generations and scorings on one transformers model over a ``SlotCache``.

    Args:
        model: the causal LM, in eval mode on ``device``; only the runner's thread uses it.
        device: where the model runs.
        slots: how many generations are decoded together; further ones wait.
        slot_length: most tokens (prompt and generated) one generation holds.
        graphs: capture the decode step as CUDA graphs (only on a CUDA device).
    """

    def __init__(self, model, device: str, slots: int, slot_length: int, graphs: bool) -> None:
        self._slot_cache = SlotCache(model.config, slots, slot_length, model.dtype, device)
        self._slot_of: list[_Request | None] = [None] * slots
        self._graphs = graphs and str(device).startswith("cuda")
        self._captured: dict[int, _CapturedStep] = {}
        if self._graphs:
            # Captured before any request runs: warming a capture up writes a key and a value
            # at column 0 of each of its rows, which would overwrite a running generation's.
            for size in sorted({captured_size(rows, slots) for rows in range(1, slots + 1)}):
                self._captured[size] = _CapturedStep(model, self._slot_cache, size)
        #: Prefill passes run so far, and the most prompts one of them admitted.
        self.prefill_passes = 0
        self.largest_prefill = 0
        super().__init__(model, device, slots)

    # ------------------------------------------------------------------ the runner thread

    def _busy(self) -> bool:
        return any(request is not None for request in self._slot_of)

    def _step(self) -> None:
        self._drop_finished()
        scorings, tree = self._take_scorings()
        if scorings:
            self._score(scorings, tree)
        admitted = self._next_generations()
        if admitted:
            self._prefill(admitted)
        if self._busy():
            self._decode_step()

    def _next_generations(self) -> list[_Request]:
        """The oldest waiting generations, one per free slot, up to ``PREFILL_STEP_TOKENS``
        prompt tokens together (at least one)."""
        free = self._slot_of.count(None)
        taken: list[_Request] = []
        tokens = 0
        with self._wake:
            if not self._busy() and any(r.score is None for r in self._waiting):
                self._let_a_burst_arrive()
            for request in list(self._waiting):
                if len(taken) >= free:
                    break
                if request.cancelled.is_set():
                    self._waiting.remove(request)
                    continue
                if request.score is not None:
                    continue
                if taken and tokens + len(request.prompt) > PREFILL_STEP_TOKENS:
                    break
                self._waiting.remove(request)
                taken.append(request)
                tokens += len(request.prompt)
        return taken

    def _let_a_burst_arrive(self) -> None:
        """Wait (holding ``_wake``) until no request has arrived for ``ARRIVAL_QUIET_S``, at
        most ``ARRIVAL_WAIT_S`` in all."""
        deadline = time.monotonic() + ARRIVAL_WAIT_S
        while not self._closed:
            arrived = len(self._waiting)
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wake.wait(min(ARRIVAL_QUIET_S, left))
            if len(self._waiting) == arrived:
                return

    def _fail_everything(self, error: BaseException) -> None:
        running = [request for request in self._slot_of if request is not None]
        self._slot_of = [None] * len(self._slot_of)
        for request in running + self._take_waiting():
            request.results.put(error)

    def _drop_finished(self) -> None:
        for slot, request in enumerate(self._slot_of):
            if request is None:
                continue
            if request.cancelled.is_set():
                self._slot_of[slot] = None
            elif stop_asked(request):
                request.results.put(END)
                self._slot_of[slot] = None

    def _prefill(self, requests: list[_Request]) -> None:
        """Evaluate the prompts in one packed pass, each into a free slot, and choose each
        one's first token."""
        requests = [r for r in requests if not _ended_before_start(r)]
        if not requests:
            return
        free = [slot for slot, request in enumerate(self._slot_of) if request is None]
        slots = free[: len(requests)]
        device = self._device
        tokens = [token for request in requests for token in request.prompt]
        lengths = torch.tensor([len(request.prompt) for request in requests], device=device)
        owner = torch.repeat_interleave(torch.tensor(slots, device=device), lengths)
        starts = torch.cumsum(lengths, 0) - lengths
        positions = torch.arange(len(tokens), device=device) - torch.repeat_interleave(
            starts, lengths
        )
        try:
            self._slot_cache.plan_prefill(owner, positions)
            output = self._model(
                input_ids=torch.tensor([tokens], device=device),
                position_ids=positions[None],
                attention_mask=self._packed_mask(owner),
                past_key_values=self._slot_cache,
                use_cache=True,
                logits_to_keep=starts + lengths - 1,
            )
            logits = output.logits[0].float()
        except BaseException as error:  # noqa: BLE001 - handed to the requests
            for request in requests:
                request.results.put(error)
            return
        self.prefill_passes += 1
        self.largest_prefill = max(self.largest_prefill, len(requests))
        for slot, request, row in zip(slots, requests, logits, strict=True):
            request.length = len(request.prompt)
            if self._take_token(request, row):
                self._slot_of[slot] = request

    def _packed_mask(self, owner: torch.Tensor) -> torch.Tensor:
        """Block-diagonal causal: each token sees the earlier tokens of its own prompt."""
        size = owner.shape[0]
        index = torch.arange(size, device=self._device)
        sees = (owner[:, None] == owner[None, :]) & (index[:, None] >= index[None, :])
        return _additive(sees, self._model.dtype)[None, None]

    def _decode_step(self) -> None:
        rows = max(slot for slot, request in enumerate(self._slot_of) if request is not None) + 1
        running = self._slot_of[:rows]
        last = [request.generated[-1] if request else 0 for request in running]
        lengths = [request.length if request else 0 for request in running]
        try:
            if self._graphs:
                logits = self._replay(last, lengths)
            else:
                logits = self._eager_step(last, lengths)
        except BaseException as error:  # noqa: BLE001 - handed to the requests
            self._fail_running(error)
            return
        self.largest_decode_batch = max(self.largest_decode_batch, rows - running.count(None))
        self.decode_steps += 1
        self.recent_decode_batches.append((self.decode_steps, rows - running.count(None)))
        for slot, request in enumerate(running):
            if request is None:
                continue
            request.length += 1
            if not self._take_token(request, logits[slot]):
                self._slot_of[slot] = None

    def _eager_step(self, last: list[int], lengths: list[int]) -> torch.Tensor:
        """One decode step over the columns in use."""
        device = self._device
        positions = torch.tensor(lengths, device=device)
        span = max(lengths) + 1
        self._slot_cache.plan_decode(positions, span)
        output = self._model(
            input_ids=torch.tensor(last, device=device)[:, None],
            position_ids=positions[:, None],
            attention_mask=_decode_mask(positions, span, self._model.dtype),
            past_key_values=self._slot_cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return output.logits[:, -1].float()

    def _replay(self, last: list[int], lengths: list[int]) -> torch.Tensor:
        """One decode step replayed from the graph captured for the next batch size up."""
        step = self._captured[captured_size(len(last), len(self._slot_of))]
        return step.run(last, lengths)[: len(last)].float()

    def _fail_running(self, error: BaseException) -> None:
        running = [request for request in self._slot_of if request is not None]
        self._slot_of = [None] * len(self._slot_of)
        for request in running:
            request.results.put(error)


def captured_size(rows: int, slots: int) -> int:
    """The rows of the captured step that runs ``rows`` rows: the next of ``CAPTURED_SIZES``,
    but never more rows than the cache has slots (a step's row ``i`` is slot ``i``)."""
    return min(next((size for size in CAPTURED_SIZES if size >= rows), slots), slots)


class _CapturedStep:
    """A decode step for ``size`` rows over the whole slot length, captured as a CUDA graph:
    replaying it copies the new inputs into the tensors it was captured on."""

    def __init__(self, model, cache: SlotCache, size: int) -> None:
        device = cache.decode_positions.device
        self._cache = cache
        self._size = size
        self._tokens = torch.zeros((size, 1), dtype=torch.long, device=device)
        self._positions = torch.zeros(size, dtype=torch.long, device=device)
        self._mask = _decode_mask(self._positions, cache.max_len, model.dtype)

        def forward() -> torch.Tensor:
            cache.plan_decode(self._positions, cache.max_len)
            return model(
                input_ids=self._tokens,
                position_ids=self._positions[:, None],
                attention_mask=self._mask,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            ).logits[:, -1]

        # Warm up on a side stream (lazy initialisations stay out of the graph), then capture.
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            forward()
        torch.cuda.current_stream(device).wait_stream(stream)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self._logits = forward()
        logger.info("captured a decode step for %d rows", size)

    def run(self, last: list[int], lengths: list[int]) -> torch.Tensor:
        rows = len(last)
        padded = [0] * (self._size - rows)
        self._tokens.copy_(torch.tensor(last + padded)[:, None], non_blocking=True)
        self._positions.copy_(torch.tensor(lengths + padded), non_blocking=True)
        self._mask.copy_(_decode_mask(self._positions, self._cache.max_len, self._mask.dtype))
        self._cache.plan_decode(self._positions, self._cache.max_len)
        self._graph.replay()
        return self._logits


def _decode_mask(positions: torch.Tensor, span: int, dtype: torch.dtype) -> torch.Tensor:
    """(rows, 1, 1, span): row ``i`` sees its columns up to ``positions[i]`` (its new token)."""
    columns = torch.arange(span, device=positions.device)
    return _additive(columns[None, :] <= positions[:, None], dtype)[:, None, None]


def _additive(sees: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where a query sees a key, the dtype's lowest value elsewhere."""
    mask = torch.zeros(sees.shape, dtype=dtype, device=sees.device)
    return mask.masked_fill_(~sees, torch.finfo(dtype).min)


def _ended_before_start(request: _Request) -> bool:
    if stop_asked(request):
        request.results.put(END)
        return True
    return False
