"""Drafts checked in one evaluation on a llama.cpp context (prompt-lookup decoding, vLLM's n-gram
speculation): a generation's last token and the tokens it is likely to write next are
evaluated together, and a token is chosen from each row in turn, as decode steps would, up to
the first that differs from the draft. Every token kept was chosen from the row of the tokens
before it, so the generation writes what it writes without a draft, in fewer evaluations.

``DraftChecking`` is the part of ``llamacpp_runner.BatchingRunner`` that does it. A draft is
either given (``SamplingParams.draft``: after tool results, the call repeating the last
reply's), the text a constrained output's grammar allows alone next (a member's name, the
closing brackets: ``RunnerRequest.forced``, SGLang's jump-forward decoding checked as a draft,
so the tokens stay the model's own), or looked up in the generation's prompt and output
(``draft_from_prompt``: the answer from tool results, ``backend.engines.prompt_lookup``).
"""

from __future__ import annotations

from backend.engines.llamacpp_slots import Slot
from backend.engines.prompt_lookup import looked_up_draft
from backend.engines.request_runner import RunnerRequest

#: Draft tokens checked by a generation's first evaluation of its draft, and by each
#: evaluation of a draft looked up.
FIRST_DRAFT_WINDOW = 4


class DraftChecking:
    """Draft checking for ``BatchingRunner``, which provides the context (``_native``,
    ``_memory``, ``_batch_tokens``) and the runner's steps (``_evaluate``,
    ``_after_evaluation``)."""

    def _check_drafts(self, slots: list[Slot], alone: bool) -> list[Slot]:
        """Check the draft of every slot's request that has one now, each in an evaluation of
        its own, and return the slots left to decode. A draft is looked up only while its
        request runs ``alone``: beside others, its evaluation of its own would cost the batch
        another read of the weights."""
        drafts = {slot: self._draft(slot.request, lookup=alone) for slot in slots}
        for slot, (draft, forced) in drafts.items():
            if draft:
                request = slot.request
                kept = self._verify_draft(slot, draft)
                if forced and kept < len(draft):
                    request.forced_from = len(request.generated) + len(draft) - kept
        return [slot for slot in slots if not drafts[slot][0]]

    def _draft(self, request: RunnerRequest, lookup: bool) -> tuple[list[int], bool]:
        """The tokens to check after the request's last one, and whether they are forced
        text: the next of its draft while its tokens so far are the draft's first ones (at
        least FIRST_DRAFT_WINDOW, then as many as have been kept: a draft that misses early
        costs few rows, one that holds is checked in few evaluations), else, with
        ``lookup``, the tokens its constraint allows alone next (``RunnerRequest.forced``;
        not again within the text of one that missed, ``forced_from``), else, for a request
        that looks drafts up, FIRST_DRAFT_WINDOW tokens looked up in its prompt and output;
        empty: none."""
        generated = len(request.generated)
        if _draft_ahead(request):
            window = min(max(FIRST_DRAFT_WINDOW, generated), self._batch_tokens - 1)
            return list(request.draft[generated : generated + window]), False
        if lookup and request.forced is not None and generated >= max(request.forced_from, 1):
            room = min(self._batch_tokens - 1, request.budget - generated - 1)
            if forced := request.forced()[: max(room, 0)]:
                return forced, True
        if lookup and request.lookup and generated:
            size = min(FIRST_DRAFT_WINDOW, request.budget - generated - 1)
            if size > 0:
                return looked_up_draft(request.prompt + request.generated, size), False
        return [], False

    def _verify_draft(self, slot: Slot, drafted: list[int]) -> int:
        """Evaluate the request's last token and the ``drafted`` tokens in one call, and
        choose a token from each row in turn up to the first that differs from the draft.
        The rows after it, evaluated on draft tokens not chosen, are dropped from the cache.
        Returns how many of the drafted tokens were chosen (all of them where the request
        finished on one)."""
        request = slot.request
        tokens = [request.generated[-1], *drafted]
        start = len(slot.cached)
        entries = [(slot.seq_id, token, start + i, True) for i, token in enumerate(tokens)]
        if not self._evaluate(slot, entries, wants_logits=True):
            return len(drafted)
        kept = len(drafted)
        for row, token in enumerate(tokens):
            slot.cached.append(token)
            self._after_evaluation(slot, row)
            if slot.request is not request:
                break  # finished
            if row < len(drafted) and request.generated[-1] != drafted[row]:
                request.draft = ()
                kept = row
                break
        self._native.llama_memory_seq_rm(self._memory, slot.seq_id, len(slot.cached), -1)
        return kept


def _draft_ahead(request: RunnerRequest) -> bool:
    """Whether the request's tokens so far are its draft's first ones, with more to come (a
    draft is dropped once a chosen token leaves it)."""
    if not request.draft:
        return False
    generated = len(request.generated)
    if 0 < generated < len(request.draft) and request.generated[-1] == request.draft[generated - 1]:
        return True
    request.draft = ()
    return False
