"""Continuous batching for a transformers causal LM: every running generation advances in one
forward pass.

Decoding one token reads every weight of the model; decoding the next tokens of eight
conversations in one forward pass reads them once. A single thread (the runner) owns the model
and loops: score every waiting scoring from their prompt tree, walked in passes that evaluate
shared beginnings once (``backend.engines.prompt_tree``), start the oldest waiting
generation when a slot is free by evaluating its prompt alone, then advance every running
generation by one token in one batched forward pass, and hand each new token to its request's
queue. The caller's ``generate`` is a generator over that queue.

The running generations share one ``DynamicCache`` whose rows are left-padded to a common
length: a request joining is padded on the left (or the others are, if its prompt is the
longer), one leaving is removed from the batch dimension, and columns that are padding in every
row are cut. An attention mask hides the padding and ``position_ids`` give each row its own
positions, so a row computes what it would alone up to the rounding of batched kernels (a
longer masked key range, other matrix shapes); a lone generation runs without a mask, exactly
as the one-at-a-time engine did. Every row advances at every step, so a generation runs ahead
of a slow reader (its tokens queue, bounded by its budget) rather than pausing as in the
llama.cpp runner: a paused row would leave a hole in the shared cache. A prompt is evaluated
alone, in one pass, while the running generations wait for that step.

Why not transformers' own continuous batching (``generation/continuous_batching``, 5.23)? It
runs on the CPU (sdpa over its paged cache), streams and cancels, but it samples inside its
forward step (``ModelRunner._forward_process_and_sample`` in ``model_runner.py``) with what
the service cannot hand it per request:

- greedy or sampled is one switch for the whole manager (``do_sample`` of its
  ``GenerationConfig``), and sampling draws from the global generator, seeded once per manager
  (``ContinuousBatchingConfig.seed``): a seeded request's tokens would depend on what else runs;
- its logits processors come only from the ``GenerationConfig``
  (``model._get_logits_processor`` in ``ContinuousBatchingManager.__init__``), and a
  per-request one receives one int32 per request (``ContinuousBatchingLogitsProcessor.
  prepare_tensor_args``): no room for a grammar's vocabulary-wide mask whose state must take
  each sampled token before the next step;
- ``return_logprobs`` gives the chosen token's log-probability only, not the ``top_logprobs``
  alternatives, nor those of the masked distribution.

Fitting ours in would mean replacing its private sampling objects. Here every token is chosen
by ``backend.engines.sampling.choose_token``, as in the llama.cpp engine.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from backend.engines.prompt_tree import PromptTreeBuilder, ScoringPass
from backend.engines.request_runner import END, RequestRunner, RunnerRequest, stop_asked

#: Most distinct prompt tokens the scorings of one step evaluate (more scorings wait for the
#: next step, so running generations are not held up for long).
SCORING_STEP_TOKENS = 8192
#: Most tokens of the prompt tree one forward pass evaluates (``PromptTreeBuilder.passes``).
SCORING_PASS_TOKENS = 1024

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Request(RunnerRequest):
    #: Tokens this request holds in the batch's cache (the rest of its row is padding).
    length: int = 0


class TransformersRunner(RequestRunner):
    """Runs generations and scorings on one transformers model, batching those that overlap.

    Args:
        model: the causal LM, in eval mode on ``device``; only the runner's thread uses it.
        device: where the model runs.
        slots: how many generations are decoded together; further ones wait.
    """

    request_type = _Request

    def __init__(self, model, device: str, slots: int) -> None:
        super().__init__("transformers runner")
        self._model = model
        self._device = device
        self._slots = slots
        #: The most requests advanced by one forward pass so far (how much batching happened).
        self.largest_decode_batch = 0
        #: Decode steps run so far, and (step number, requests advanced) of the latest ones.
        self.decode_steps = 0
        self.recent_decode_batches: deque[tuple[int, int]] = deque(maxlen=256)
        #: Forward passes that scored prompts, and the distinct tokens they evaluated.
        self.scoring_passes = 0
        self.scored_tokens = 0
        self._rows: list[_Request] = []  # the running generations, in the cache's batch order
        self._cache: DynamicCache | None = None
        self._start()

    # ------------------------------------------------------------------ the runner thread

    def _thread_context(self) -> contextlib.AbstractContextManager:
        # inference_mode is thread-local: set once for the runner, never on callers' threads.
        return torch.inference_mode()

    def _busy(self) -> bool:
        return bool(self._rows)

    def _step(self) -> None:
        self._drop_finished()
        scorings, tree = self._take_scorings()
        if scorings:
            self._score(scorings, tree)
        request = self._next_generation()
        if request is not None:
            self._admit(request)
        if self._rows:
            self._decode_step()

    def _take_scorings(self) -> tuple[list[_Request], list[ScoringPass]]:
        """The waiting scorings, oldest first, up to ``SCORING_STEP_TOKENS`` distinct tokens
        (at least one scoring), and the passes over their prompt tree."""
        taken: list[_Request] = []
        tree = PromptTreeBuilder()
        with self._wake:
            for request in list(self._waiting):
                if request.score is None:
                    continue
                if request.cancelled.is_set():
                    self._waiting.remove(request)
                    continue
                if taken and len(tree) + tree.added_tokens(request.prompt) > SCORING_STEP_TOKENS:
                    break
                self._waiting.remove(request)
                tree.add(request.prompt)
                taken.append(request)
        # Planned only when there is something to score: this runs before every decode step.
        return taken, tree.passes(SCORING_PASS_TOKENS) if taken else []

    def _next_generation(self) -> _Request | None:
        """The oldest waiting generation, when a slot is free."""
        if len(self._rows) >= self._slots:
            return None
        with self._wake:
            for request in list(self._waiting):
                if request.cancelled.is_set():
                    self._waiting.remove(request)
                elif request.score is None:
                    self._waiting.remove(request)
                    return request
        return None

    def _fail_everything(self, error: BaseException) -> None:
        rows, self._rows, self._cache = self._rows, [], None
        for request in rows + self._take_waiting():
            request.results.put(error)

    def _drop_finished(self) -> None:
        """Free the rows of requests whose callers stopped reading or asked to stop."""
        keep = []
        for request in self._rows:
            if request.cancelled.is_set():
                continue
            if stop_asked(request):
                request.results.put(END)
                continue
            keep.append(request)
        self._keep_rows(keep)

    def _score(self, requests: list[_Request], passes: list[ScoringPass]) -> None:
        """Score every request from the passes over their prompt tree."""
        rows: dict[int, torch.Tensor] = {}
        cache = DynamicCache()
        try:
            for scoring in passes:
                _cut(cache, scoring.keep)
                kept = torch.tensor([row for _, row in scoring.ends] or [0], device=self._device)
                output = self._model(
                    input_ids=torch.tensor([scoring.tokens], device=self._device),
                    position_ids=torch.tensor([scoring.positions], device=self._device),
                    attention_mask=self._tree_mask(scoring),
                    past_key_values=cache,
                    use_cache=True,
                    logits_to_keep=kept,
                )
                for (number, _), logits in zip(scoring.ends, output.logits[0], strict=False):
                    rows[number] = logits.float()
        except BaseException as error:  # noqa: BLE001 - handed to the requests
            for request in requests:
                request.results.put(error)
            return
        self.scoring_passes += len(passes)
        self.scored_tokens += sum(len(scoring.tokens) for scoring in passes)
        for number, request in enumerate(requests):
            try:
                request.results.put(request.score(rows[number]))
            except BaseException as error:  # noqa: BLE001 - handed to the request
                request.results.put(error)

    def _tree_mask(self, scoring: ScoringPass) -> torch.Tensor | None:
        """The pass's attention mask: all of the cached path, and within the pass each token
        its ancestors; None for a run of tokens (the model's own causal mask)."""
        if scoring.is_chain:
            return None
        dtype = self._model.dtype
        size = len(scoring.tokens)
        mask = torch.zeros((size, scoring.keep + size), dtype=dtype, device=self._device)
        sees = torch.from_numpy(scoring.sees).to(self._device)
        mask[:, scoring.keep :].masked_fill_(~sees, torch.finfo(dtype).min)
        return mask[None, None]

    def _admit(self, request: _Request) -> None:
        """Evaluate a generation's prompt alone, then choose its first token and let it join
        the batch."""
        if stop_asked(request):
            request.results.put(END)
            return
        cache = DynamicCache()
        try:
            input_ids = torch.tensor([request.prompt], dtype=torch.long, device=self._device)
            output = self._model(
                input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=1
            )
            logits = output.logits[0, -1].float()
        except BaseException as error:  # noqa: BLE001 - handed to the request
            request.results.put(error)
            return
        request.length = len(request.prompt)
        if self._take_token(request, logits):
            self._join(request, cache)

    def _take_token(self, request: _Request, logits: torch.Tensor, best: int | None = None) -> bool:
        """Choose the request's next token and hand it on; whether the request goes on.
        ``best`` is the row's argmax where the caller read it (``TokenChooser``)."""
        # Asked again after the forward pass: meanwhile the reader took the last token, and
        # may now want no more (a stop sequence, a client gone).
        if request.cancelled.is_set() or stop_asked(request):
            request.results.put(END)
            return False
        try:
            token = request.choose(logits) if best is None else request.choose(logits, best)
        except BaseException as error:  # noqa: BLE001 - handed to the request
            request.results.put(error)
            return False
        request.generated.append(token)
        if token in request.end_ids or len(request.generated) >= request.budget:
            request.results.put(token)
            request.results.put(END)
            return False
        self._hand_on(request, token)
        return True

    def _hand_on(self, request: _Request, token: int) -> None:
        """Give a generation's reader its token (a runner may hold it back a little)."""
        request.results.put(token)

    def _join(self, request: _Request, cache: DynamicCache) -> None:
        """Add a prefilled request's cache to the batch's, left-padding the shorter side."""
        if self._cache is None:
            self._rows, self._cache = [request], cache
            return
        width = self._cache.get_seq_length()
        added = cache.get_seq_length()
        for ours, theirs in zip(self._cache.layers, cache.layers, strict=True):
            ours.keys = torch.cat([_pad_left(ours.keys, added), _pad_left(theirs.keys, width)])
            ours.values = torch.cat(
                [_pad_left(ours.values, added), _pad_left(theirs.values, width)]
            )
        self._rows.append(request)

    def _keep_rows(self, keep: list[_Request]) -> None:
        """Shrink the batch to ``keep`` (a subsequence of the rows), then cut the columns that
        are padding in every remaining row."""
        if len(keep) == len(self._rows):
            return
        if not keep:
            self._rows, self._cache = [], None
            return
        indices = [i for i, request in enumerate(self._rows) if request in keep]
        self._cache.batch_select_indices(torch.tensor(indices, device=self._device))
        self._rows = keep
        cut = self._cache.get_seq_length() - max(request.length for request in keep)
        if cut > 0:
            for layer in self._cache.layers:
                layer.keys = layer.keys[..., cut:, :]
                layer.values = layer.values[..., cut:, :]

    def _decode_step(self) -> None:
        rows = self._rows
        width = self._cache.get_seq_length()
        device = self._device
        last = torch.tensor([[r.generated[-1]] for r in rows], dtype=torch.long, device=device)
        positions = torch.tensor([[r.length] for r in rows], dtype=torch.long, device=device)
        mask = None
        if any(request.length < width for request in rows):
            # Row i's own tokens are its last ``length`` columns, then the new token.
            columns = torch.arange(width + 1, device=self._device)
            starts = torch.tensor([[width - r.length] for r in rows], device=self._device)
            mask = (columns >= starts).long()
        try:
            output = self._model(
                input_ids=last,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=self._cache,
                use_cache=True,
                logits_to_keep=1,
            )
        except BaseException as error:  # noqa: BLE001 - handed to the requests
            rows, self._rows, self._cache = self._rows, [], None
            for request in rows:
                request.results.put(error)
            return
        self.largest_decode_batch = max(self.largest_decode_batch, len(rows))
        self.decode_steps += 1
        self.recent_decode_batches.append((self.decode_steps, len(rows)))
        logits = output.logits[:, -1].float()
        keep = []
        for row, request in enumerate(rows):
            request.length += 1
            if self._take_token(request, logits[row]):
                keep.append(request)
        self._keep_rows(keep)


def _cut(cache: DynamicCache, length: int) -> None:
    """Keep the first ``length`` positions of a batch-of-one cache."""
    for layer in cache.layers:
        keys = getattr(layer, "keys", None)
        if keys is not None and keys.shape[-2] > length:
            layer.keys = layer.keys[..., :length, :]
            layer.values = layer.values[..., :length, :]


def _pad_left(states: torch.Tensor, width: int) -> torch.Tensor:
    """``states`` (batch, heads, positions, dim) with zero columns on the left up to ``width``
    positions."""
    missing = width - states.shape[-2]
    if missing <= 0:
        return states
    padding = states.new_zeros(*states.shape[:-2], missing, states.shape[-1])
    return torch.cat([padding, states], dim=-2)
