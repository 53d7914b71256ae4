"""Scoring several prompts that share a prefix on one llama.cpp context: the prefix once, then
every suffix in one batched evaluation on top of it (the judge's claims against one document,
the tool-need check's readings of one conversation).

``SuffixScoring`` is the part of ``llamacpp_runner.BatchingRunner`` that does it: the API that
turns (prefix, suffixes) groups into requests, and the step that scores a request's suffixes
once its prefix is evaluated. Each suffix runs in a sequence of its own that shares the
prefix's KV cells, so it reads what it would read evaluated alone after the prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from backend.engines.llamacpp_slots import Slot
from backend.engines.prompt_tree import suffix_batches


class SuffixScoring:
    """Shared-prefix scorings for ``BatchingRunner``, which provides the context (``_native``,
    ``_memory``, ``_batch``, ``_batch_tokens``), the sequences kept for suffixes
    (``_suffix_seqs``) and the runner's bookkeeping (``_await_scorings``, ``_make_room``,
    ``_finish``, ``_release``)."""

    def score_suffixes(
        self,
        groups: Sequence[tuple[list[int], list[list[int]]]],
        score: Callable[..., object],
        hidden: bool = False,
        cut_as_generation: bool = False,
    ) -> list[list]:
        """For each (prefix, suffixes) group, ``score(logits)`` after ``prefix + suffix`` for
        each suffix, in order: the prefix is evaluated once (or reused from the cache), the
        suffixes together on top of it. The groups are submitted together.

        A group of one suffix shares nothing: it is scored as one prompt, evaluated as a lone
        prompt always is (its last token evaluated alone on top of the rest moves P(yes)
        beyond what an engine with a clean cache reads, benchmarks/README.md). With
        ``hidden``, each is ``score(logits, hidden state)`` at the suffix's last token,
        always evaluated in a batch of last tokens (``NativeBatch.score_ends``), a lone
        prompt's too (its prefix all but its last token): every reading is laid out alike.
        With ``cut_as_generation`` the prompts are cut into chunks as a generation's are
        (``BatchingRunner``'s ``message_starts``): a generation's cache is then reused up to
        its last message, and a generation from the same prompt reuses theirs.

        Raises:
            ValueError: a prefix is empty, a suffix empty or longer than one evaluation
                holds, or the runner has no sequences for suffixes.
        """
        if not self._suffix_seqs:
            raise ValueError("this runner was made without sequences for suffixes")
        requests = []
        for prefix, suffixes in groups:
            if not prefix or any(not 0 < len(s) <= self._batch_tokens for s in suffixes):
                raise ValueError(
                    f"need a prefix and suffixes of 1 to {self._batch_tokens} tokens each"
                )
            whole = [*prefix, *suffixes[0]]
            evaluate, ends = (whole[:-1], [whole[-1:]]) if hidden else (whole, None)
            if len(suffixes) > 1:
                evaluate, ends = list(prefix), [list(s) for s in suffixes]
            request = self.request_type(evaluate, 0, None, score, lambda: False, frozenset())
            request.suffixes, request.hidden = ends, hidden
            request.cut_as_generation = cut_as_generation
            requests.append(request)
        scored = self._await_scorings(requests)
        return [
            result if request.suffixes is not None else [result]
            for request, result in zip(requests, scored, strict=True)
        ]

    def _score_suffixes(self, slot: Slot) -> None:
        """Score every suffix of the slot's request on top of its evaluated prompt.

        Each suffix runs in a sequence of its own that shares the prompt's cells
        (``llama_memory_seq_cp``; llama.cpp's sequences share KV cells), so it attends to the
        prompt and itself only, at the positions it would have alone. As many suffixes as
        fit go into one evaluation; their sequences are emptied after it.
        """
        request = slot.request
        base = len(slot.cached)
        results: list[object] = []
        for group in suffix_batches(request.suffixes, len(self._suffix_seqs), self._batch_tokens):
            self._make_room(sum(len(suffix) for suffix in group))
            if slot.request is None:
                return  # set aside to free the cache; it is scored again when resumed
            entries: list[tuple[int, int, int, bool]] = []
            rows: list[int] = []  # each suffix's last entry
            try:
                for seq_id, suffix in zip(self._suffix_seqs, group, strict=False):
                    self._native.llama_memory_seq_cp(self._memory, slot.seq_id, seq_id, 0, base)
                    entries += [(seq_id, token, base + i, False) for i, token in enumerate(suffix)]
                    rows.append(len(entries) - 1)
                results += self._batch.score_ends(entries, rows, request.score, request.hidden)
            except BaseException as error:  # noqa: BLE001 - handed to the request
                self._finish(slot, error)
                return
            finally:
                for seq_id in self._suffix_seqs[: len(group)]:
                    self._native.llama_memory_seq_rm(self._memory, seq_id, 0, -1)
        request.results.put(results)
        self._release(slot)
