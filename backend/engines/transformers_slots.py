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
  to the next) and attention span (``captured_spans``: the columns a step reads, the slot
  length and its halvings), when it starts, and replays it; elsewhere it runs the same step
  eagerly over the columns in use. A step reads only the span its longest row needs: over the
  whole slot length, 64 rows of 4,096 columns would read every key and value of the cache
  (7.5 GB for the default chat model) at every token.
- reads the step's greedy choices with one copy to the host (the argmax of every row), and
  hands the logits to a request's own chooser only where its choice is more than greedy
  (sampled, constrained, with log-probabilities);
- on CUDA, hands a step's tokens to their readers only once the next step is launched
  (``overlap``): each token wakes a reading thread, whose work (detokenising, output
  processing) then runs while the GPU computes, instead of holding the GIL that the runner
  needs to launch the next step.

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
#: The shortest attention span captured (the slot length is halved down to it).
SHORTEST_CAPTURED_SPAN = 256

logger = logging.getLogger(__name__)


class SlotRunner(TransformersRunner):
    """Runs generations and scorings on one transformers model over a ``SlotCache``.

    Args:
        model: the causal LM, in eval mode on ``device``; only the runner's thread uses it.
        device: where the model runs.
        slots: how many generations are decoded together; further ones wait.
        slot_length: most tokens (prompt and generated) one generation holds.
        graphs: capture the decode step as CUDA graphs (only on a CUDA device).
        overlap: hand a decode step's tokens on after launching the next step (default: on
            CUDA, where a launch returns before the step is computed).
    """

    def __init__(
        self,
        model,
        device: str,
        slots: int,
        slot_length: int,
        graphs: bool,
        overlap: bool | None = None,
    ) -> None:
        self._slot_cache = SlotCache(model.config, slots, slot_length, model.dtype, device)
        self._slot_of: list[_Request | None] = [None] * slots
        on_cuda = str(device).startswith("cuda")
        self._graphs = graphs and on_cuda
        self._overlap = on_cuda if overlap is None else overlap
        #: Tokens chosen by the last decode step that their readers have not been handed.
        self._unsent: list[tuple[_Request, int]] = []
        self._captured: dict[tuple[int, int], _CapturedStep] = {}
        if self._graphs:
            # Captured before any request runs: warming a capture up writes a key and a value
            # at column 0 of each of its rows, which would overwrite a running generation's.
            # One memory pool for all: steps are replayed one at a time, and each one's logits
            # are read before the next replay.
            pool = torch.cuda.graph_pool_handle()
            sizes = sorted({captured_size(rows, slots) for rows in range(1, slots + 1)})
            for size in reversed(sizes):
                for span in reversed(captured_spans(slot_length)):
                    step = _CapturedStep(model, self._slot_cache, size, span, pool)
                    self._captured[size, span] = step
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
            self._send()
            self._score(scorings, tree)
        admitted = self._next_generations()
        if admitted:
            self._send()
            self._prefill(admitted)
        if self._busy():
            self._decode_step()
        if not self._busy():
            self._send()

    def _hand_on(self, request: _Request, token: int) -> None:
        if self._overlap:
            self._unsent.append((request, token))
        else:
            super()._hand_on(request, token)

    def _send(self) -> None:
        """Hand the readers the tokens chosen but not yet sent."""
        for request, token in self._unsent:
            request.results.put(token)
        self._unsent = []

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
        self._send()
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
                self._send()  # its last token before its end
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
        best = logits.argmax(-1).tolist()
        for slot, request, row, token in zip(slots, requests, logits, best, strict=True):
            request.length = len(request.prompt)
            if self._take_token(request, row, token):
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
            self._send()  # the last step's tokens, while this one computes
            best = logits.argmax(-1).tolist()  # every row's greedy choice, in one copy
        except BaseException as error:  # noqa: BLE001 - handed to the requests
            self._fail_running(error)
            return
        self.largest_decode_batch = max(self.largest_decode_batch, rows - running.count(None))
        self.decode_steps += 1
        self.recent_decode_batches.append((self.decode_steps, rows - running.count(None)))
        for slot, (request, row) in enumerate(zip(running, logits.unbind(), strict=True)):
            if request is None:
                continue
            request.length += 1
            if not self._take_token(request, row, best[slot]):
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
        """One decode step replayed from the graph captured for the next batch size and span
        up."""
        size = captured_size(len(last), len(self._slot_of))
        span = captured_span(max(lengths) + 1, self._slot_cache.max_len)
        return self._captured[size, span].run(last, lengths)[: len(last)].float()

    def _fail_running(self, error: BaseException) -> None:
        self._send()
        running = [request for request in self._slot_of if request is not None]
        self._slot_of = [None] * len(self._slot_of)
        for request in running:
            request.results.put(error)


def captured_size(rows: int, slots: int) -> int:
    """The rows of the captured step that runs ``rows`` rows: the next of ``CAPTURED_SIZES``,
    but never more rows than the cache has slots (a step's row ``i`` is slot ``i``)."""
    return min(next((size for size in CAPTURED_SIZES if size >= rows), slots), slots)


def captured_spans(slot_length: int) -> list[int]:
    """The attention spans captured for a slot length, shortest first: the slot length and
    its halvings, none shorter than ``SHORTEST_CAPTURED_SPAN``."""
    spans = [slot_length]
    while spans[0] // 2 >= SHORTEST_CAPTURED_SPAN:
        spans.insert(0, spans[0] // 2)
    return spans


def captured_span(columns: int, slot_length: int) -> int:
    """The captured span that covers ``columns`` columns: the shortest that does."""
    return next(span for span in captured_spans(slot_length) if span >= columns)


class _CapturedStep:
    """A decode step for ``size`` rows over the first ``span`` columns, captured as a CUDA
    graph: replaying it copies the new tokens and positions into the tensor it was captured
    on (one copy from pinned host memory); the mask is computed from them inside the graph."""

    def __init__(self, model, cache: SlotCache, size: int, span: int, pool) -> None:
        device = cache.decode_positions.device
        self._size = size
        self._inputs = torch.zeros((2, size), dtype=torch.long, device=device)
        self._staged = torch.zeros((2, size), dtype=torch.long, pin_memory=True)
        tokens, positions = self._inputs[0], self._inputs[1]

        def forward() -> torch.Tensor:
            cache.plan_decode(positions, span)
            return model(
                input_ids=tokens[:, None],
                position_ids=positions[:, None],
                attention_mask=_decode_mask(positions, span, model.dtype),
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
        with torch.cuda.graph(self._graph, pool=pool):
            self._logits = forward()
        logger.info("captured a decode step for %d rows over %d columns", size, span)

    def run(self, last: list[int], lengths: list[int]) -> torch.Tensor:
        padding = [0] * (self._size - len(last))
        # Written through numpy, without a tensor per list. The previous step's copy from
        # this buffer is done: its logits were read on the host since.
        staged = self._staged.numpy()
        staged[0], staged[1] = last + padding, lengths + padding
        self._inputs.copy_(self._staged, non_blocking=True)
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
