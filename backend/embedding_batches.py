"""Splitting many texts into embedding requests that the service accepts (spec section 8):
at most 100 strings and under 204,800 tokens per request.

The token limit is kept without a tokenizer, so that it works the same against a server: a
text is counted as its UTF-8 byte length plus a margin, which no subword tokenizer exceeds
(each token covers at least one byte, and the prefix and special tokens fit in the margin).
Texts of up to about 2 KB still go 100 to a request; longer ones go in smaller batches than
the exact token count would allow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from backend.validation import MAX_EMBEDDING_INPUTS, MAX_TOKENS_PER_EMBEDDING_REQUEST

#: Tokens allowed for a text beyond its byte count: the model's prefix and special tokens.
TOKEN_MARGIN = 16


def estimate_tokens(text: str) -> int:
    """An upper bound on the tokens the service counts for ``text``."""
    return len(text.encode("utf-8")) + TOKEN_MARGIN


def plan_batches(
    texts: Sequence[str],
    max_inputs: int = MAX_EMBEDDING_INPUTS,
    max_tokens: int = MAX_TOKENS_PER_EMBEDDING_REQUEST,
    count_tokens: Callable[[str], int] = estimate_tokens,
) -> list[list[str]]:
    """Split ``texts`` in order into batches of at most ``max_inputs`` strings whose counted
    tokens stay under ``max_tokens``. A text too long for any batch goes alone, so the service
    answers with its per-string error rather than the client guessing."""
    batches: list[list[str]] = []
    batch: list[str] = []
    tokens = 0
    for text in texts:
        count = count_tokens(text)
        if batch and (len(batch) == max_inputs or tokens + count >= max_tokens):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(text)
        tokens += count
    if batch:
        batches.append(batch)
    return batches
