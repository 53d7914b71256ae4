"""A token count needing no tokenizer, for ``ChatCore`` where the backend cannot count."""

from __future__ import annotations

import math
import re

_PIECES = re.compile(r"(\d+)|([^\W\d_]+)|([^\w\s]+|_+)|(\s*\n\s*)")


def estimate_token_count(text: str) -> int:
    """A rough token count needing no tokenizer, for when the model's tokenizer is not in
    this process (an HTTP backend) and no ``custom_get_token_ids`` is given.

    Qwen-style BPE: one token per digit, about six letters per token of a Latin word and
    1.5 characters per token in other scripts, two symbols per punctuation token, one per
    line break; spaces ride on the next word.
    """
    total = 0
    for digits, word, symbols, _newline in _PIECES.findall(text):
        if digits:
            total += len(digits)
        elif word:
            # Latin words merge well; other scripts (Hangul, kana, CJK) far less.
            total += math.ceil(len(word) / 6) if word.isascii() else math.ceil(len(word) * 2 / 3)
        elif symbols:
            total += math.ceil(len(symbols) / 2)
        else:
            total += 1
    return total
