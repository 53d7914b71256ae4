"""The API's size limits (spec section 8), and splitting many texts into embedding requests
that keep them.

An embedding request holds at most 100 strings of at most 4000 tokens each, and fewer than
204,800 tokens in all. Clients (the adapters, the bulk runner) split long lists without a
tokenizer, so that the split works the same against a server: a text is counted by an upper
bound on the tokens any subword tokenizer makes of it, its UTF-8 bytes (each token covers at
least one byte of the text the tokenizer reads: the text as given, or its NFKC form for
SentencePiece models such as e5) plus a margin for the model's prefix and special tokens.
Texts of up to about 2 KB still go 100 to a request; longer ones go in smaller requests than
an exact count would allow.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence

MAX_EMBEDDING_INPUTS = 100
MAX_TOKENS_PER_EMBEDDING_INPUT = 4000
MAX_TOKENS_PER_EMBEDDING_REQUEST = 204_800  # the total must be less than this

#: Tokens allowed for a text beyond its byte count: the model's prefix and special tokens.
TOKEN_MARGIN = 16


def token_upper_bound(text: str) -> int:
    """An upper bound on the tokens the service counts for ``text``, with no tokenizer."""
    normalised = unicodedata.normalize("NFKC", text)
    return max(len(text.encode("utf-8")), len(normalised.encode("utf-8"))) + TOKEN_MARGIN


def plan_embedding_requests(
    texts: Sequence[str],
    max_inputs: int = MAX_EMBEDDING_INPUTS,
    max_tokens: int = MAX_TOKENS_PER_EMBEDDING_REQUEST,
    count_tokens: Callable[[str], int] = token_upper_bound,
) -> list[list[str]]:
    """Split ``texts`` in order into requests of at most ``max_inputs`` strings whose counted
    tokens stay under ``max_tokens``. A text too long for any request goes alone, so the
    service answers with its per-string error rather than the client guessing."""
    requests: list[list[str]] = []
    request: list[str] = []
    tokens = 0
    for text in texts:
        count = count_tokens(text)
        if request and (len(request) == max_inputs or tokens + count >= max_tokens):
            requests.append(request)
            request, tokens = [], 0
        request.append(text)
        tokens += count
    if request:
        requests.append(request)
    return requests
