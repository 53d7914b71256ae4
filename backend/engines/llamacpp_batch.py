"""One ``llama_batch`` reused for every evaluation of a llama.cpp context (the ctypes side).

An evaluation is a list of (sequence, token, position, wants logits) entries: a prompt chunk
of one sequence, or one new token of each running sequence.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class NativeDecodeError(RuntimeError):
    """llama.cpp could not evaluate a batch."""


class NativeBatch:
    """A batch of up to ``capacity`` entries for ``ctx``, and the logits it produced.

    Args:
        native: the llama.cpp API (the ``llama_cpp`` module; tests pass a stand-in).
        ctx: the llama.cpp context the batch is evaluated in.
        capacity: the most entries one evaluation holds.
        n_vocab: the width of a row of logits.
    """

    def __init__(self, native, ctx, capacity: int, n_vocab: int, n_embd: int = 0) -> None:
        self._native = native
        self._ctx = ctx
        self._n_vocab = n_vocab
        self._n_embd = n_embd
        self._batch = native.llama_batch_init(capacity, 0, 1)

    def decode(self, entries: list[tuple[int, int, int, bool]], wants_logits: bool) -> None:
        """One ``llama_decode`` of (sequence, token, position, logits?) entries.

        A prompt chunk asks for the logits of its last entry only (``wants_logits``).

        Raises:
            NativeDecodeError: llama.cpp refused the batch.
        """
        batch = self._batch
        batch.n_tokens = len(entries)
        for i, (seq_id, token, position, logits) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = position
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq_id
            batch.logits[i] = logits
        if wants_logits:
            batch.logits[len(entries) - 1] = True
        status = self._native.llama_decode(self._ctx, batch)
        if status != 0:
            raise NativeDecodeError(f"llama.cpp could not evaluate the batch (status {status})")

    def logits(self, row: int) -> np.ndarray:
        """The last evaluation's logits for its ``row``-th entry that asked for them (a view
        into llama.cpp's buffer, valid until the next evaluation)."""
        return np.ctypeslib.as_array(
            self._native.llama_get_logits_ith(self._ctx, row), shape=(self._n_vocab,)
        )

    def decode_with_hidden(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """``decode`` with every entry an output whose final hidden state is kept as well
        (``hidden``). llama.cpp outputs every token of a batch while it computes hidden
        states, so only the positions whose hidden states are wanted go in such a batch."""
        self._native.llama_set_embeddings(self._ctx, True)
        try:
            self.decode([(seq, token, pos, True) for seq, token, pos, _ in entries], False)
        finally:
            self._native.llama_set_embeddings(self._ctx, False)

    def score_ends(
        self,
        entries: list[tuple[int, int, int, bool]],
        rows: list[int],
        score: Callable[..., object],
        hidden: bool,
    ) -> list[object]:
        """Evaluate suffixes' entries and ``score`` the logits at each suffix's last entry
        (``rows``); with ``hidden``, ``score(logits, hidden state)``, the last entries
        evaluated in a batch of their own that keeps hidden states."""
        if not hidden:
            self.decode([(*e[:3], i in rows) for i, e in enumerate(entries)], wants_logits=False)
            return [score(self.logits(row)) for row in rows]
        lasts = set(rows)
        bodies = [entry for i, entry in enumerate(entries) if i not in lasts]
        if bodies:
            self.decode(bodies, wants_logits=False)
        self.decode_with_hidden([entries[row] for row in rows])
        return [score(self.logits(i), self.hidden(i)) for i in range(len(rows))]

    def hidden(self, row: int) -> np.ndarray:
        """The final hidden state (after the last norm, before the output layer) of the
        ``row``-th entry of the last ``decode_with_hidden`` (a copy)."""
        pointer = self._native.llama_get_embeddings_ith(self._ctx, row)
        return np.ctypeslib.as_array(pointer, shape=(self._n_embd,)).copy()

    def free(self) -> None:
        self._native.llama_batch_free(self._batch)
