"""Generated tokens' log-probabilities in OpenAI's shape: each token's text, raw bytes and
most likely alternatives (``choices[].logprobs.content[]``).

A token's ``bytes`` are its raw UTF-8 bytes, which for a byte-level BPE vocabulary (Qwen's,
GPT-2's) can be part of a character: they come from the tokenizer's byte decoder (xgrammar's
decoded vocabulary, which reads byte-level, byte-fallback and plain vocabularies alike), not
from decoding the token alone. ``token`` is those bytes decoded as UTF-8 with replacement
characters, as OpenAI writes a partial character. Which tokens' entries go out, and with which
event, is decided by ``backend.chat.output.OutputProcessor``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from backend.engines.logprobs import ScoredToken
from backend.protocol.schemas import TokenLogprob, TopLogprob

logger = logging.getLogger(__name__)


def token_text(raw: bytes) -> str:
    """A token's text on the wire: its bytes as UTF-8, a partial character replaced."""
    return raw.decode("utf-8", errors="replace")


def top_entry(raw: bytes, logprob: float) -> TopLogprob:
    return TopLogprob(token=token_text(raw), logprob=logprob, bytes=list(raw))


class TokenBytes:
    """The raw bytes of each token of one tokenizer's vocabulary, looked up by id.

    Built once per chat engine (it reads the whole vocabulary). Tokenizers that are not
    Hugging Face ones (the test doubles') decode each token alone instead.
    """

    def __init__(self, tokenizer: object) -> None:
        self._tokenizer = tokenizer
        self._vocabulary: Sequence[bytes] = decoded_vocabulary(tokenizer)

    def __call__(self, token_id: int) -> bytes:
        if 0 <= token_id < len(self._vocabulary):
            return self._vocabulary[token_id]
        decoded = self._tokenizer.decode([token_id], skip_special_tokens=False)  # type: ignore[attr-defined]
        return decoded.encode("utf-8")


def decoded_vocabulary(tokenizer: object) -> Sequence[bytes]:
    """Each token's raw bytes, by id, for a Hugging Face tokenizer (read once through
    xgrammar, about a second for 150k tokens); empty for other tokenizers."""
    try:
        import xgrammar
        from transformers import PreTrainedTokenizerBase
    except ImportError:
        logger.warning("logprobs: xgrammar is missing; token bytes decoded token by token")
        return ()
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        return ()
    return xgrammar.TokenizerInfo.from_huggingface(tokenizer).decoded_vocab


class TokenLogprobsReader:
    """Turns the engine's ``ScoredToken`` ids into OpenAI's log-probability entries."""

    def __init__(self, tokenizer: object) -> None:
        self._bytes = TokenBytes(tokenizer)

    def __call__(self, token: int) -> TokenLogprob:
        if not isinstance(token, ScoredToken):
            raise TypeError(f"the chat engine gave token {token} without its log-probabilities")
        raw = self._bytes(token)
        return TokenLogprob(
            token=token_text(raw),
            logprob=token.logprob,
            bytes=list(raw),
            top_logprobs=[top_entry(self._bytes(i), logprob) for i, logprob in token.top],
        )
