"""Per-step token masks that keep generated output inside a JSON Schema (xgrammar).

xgrammar compiles a JSON Schema against the tokenizer's vocabulary once, then tells, in tens
of microseconds per step, which tokens may come next. Both engines apply the mask to the
logits before choosing a token, so greedy and sampled output alike always parses and
validates. When the value is complete only an end-of-turn token is allowed, so the model ends
there. (llama.cpp's own grammar sampler also works, but checks the whole vocabulary at every
step, many times slower than the mask (benchmarks/README.md), and the transformers engine
would still need another library.) The masks also bound the output's length
(``backend.engines.json_bounds``), so that it ends at any temperature.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterable

import numpy as np
import torch

from backend.engines.base import JSONSchemaConstraint
from backend.engines.json_bounds import JSONScanner, writes_structure

logger = logging.getLogger(__name__)


def masks_available() -> bool:
    return importlib.util.find_spec("xgrammar") is not None


class ConstraintMasks:
    """Compiles constraints for one tokenizer; ``start`` gives a mask for one generation."""

    def __init__(self, tokenizer: object, vocab_size: int, stop_token_ids: Iterable[int]) -> None:
        import xgrammar

        self._xgrammar = xgrammar
        self._info = xgrammar.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=sorted(stop_token_ids)
        )
        self._compiler = xgrammar.GrammarCompiler(self._info, max_threads=1)
        self._vocab: list[bytes] = self._info.decoded_vocab  # a token's bytes, by id
        self._endings = _Endings(self._vocab)

    def start(self, constraint: JSONSchemaConstraint) -> TokenMask | None:
        """A fresh mask, or None when xgrammar cannot compile the schema.

        Some valid schemas use what xgrammar does not support (a regex lookbehind, an
        unresolvable ``$ref``): such output is generated unconstrained rather than failing
        the request.
        """
        try:
            # The compiler caches compiled schemas: the same tools compile once.
            compiled = self._compiler.compile_json_schema(
                constraint.schema_json,
                any_whitespace=False,
                indent=constraint.indent,
                strict_mode=constraint.strict,
            )
        except RuntimeError as error:
            logger.warning("output left unconstrained: xgrammar cannot compile it: %s", error)
            return None
        return TokenMask(
            self._xgrammar,
            self._xgrammar.GrammarMatcher(compiled),
            self._info,
            self._vocab,
            self._endings,
            JSONScanner(constraint.bounds),
        )


class _Endings:
    """Which tokens end what is open, by their first byte: those the bounds narrow to, as
    bitmasks in xgrammar's layout (token i is bit i % 32 of word i // 32), so narrowing is an
    ``&`` with the grammar's own bitmask."""

    def __init__(self, decoded_vocab: list[bytes]) -> None:
        first = np.array([piece[0] if piece else 0 for piece in decoded_vocab])
        #: Tokens that close a string (inside one, a quote only closes it).
        self.string = _bitmask(first == ord('"'))
        #: Tokens that close an array or an object, and add no item after it: "}," would
        #: close one call of an array and open the next, so an array wound up that way
        #: would never end.
        no_comma = np.array([b"," not in piece for piece in decoded_vocab])
        self.container = _bitmask(np.isin(first, list(b"]}")) & no_comma)
        #: Tokens that neither continue a number nor open an array or object.
        self.scalar = _bitmask(~np.isin(first, list(b"0123456789.eE+-[{")))
        #: Tokens with a quote and no backslash before it, by their text up to that quote:
        #: inside a value string (not in an escape) that text ends the string, and the rest
        #: of each token lays out what follows it.
        closing: dict[bytes, list[int]] = {}
        for token, piece in enumerate(decoded_vocab):
            if (text := _closing_text(piece)) is not None:
                closing.setdefault(text, []).append(token)
        self.closing_with = {text: torch.tensor(ids) for text, ids in closing.items()}


def _closing_text(piece: bytes) -> bytes | None:
    """A token's text up to its first quote, where no backslash comes before it (so that,
    written inside a string outside an escape, the quote closes it); else None."""
    quote = piece.find(b'"')
    if quote < 0 or b"\\" in piece[:quote]:
        return None
    return piece[: quote + 1]


def _bitmask(allowed: np.ndarray) -> torch.Tensor:
    padded = np.zeros(-(-len(allowed) // 32) * 32, dtype=bool)
    padded[: len(allowed)] = allowed
    words = np.packbits(padded, bitorder="little").view("<i4")
    return torch.from_numpy(words.copy()).view(1, -1)


class TokenMask:
    """The allowed next tokens of one generation; ``accept`` each token chosen."""

    def __init__(
        self, xgrammar, matcher, info, vocab: list[bytes], endings: _Endings, scanner: JSONScanner
    ) -> None:
        self._xgrammar = xgrammar
        self._matcher = matcher
        self._bitmask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
        self._vocab = vocab
        self._endings = endings
        self._scanner = scanner
        self._string_tokens: list[int] = []

    def apply(self, logits: torch.Tensor) -> None:
        """Set the logits of forbidden tokens to -inf, in place (a 1-D float32 CPU tensor):
        those the grammar forbids, and past a bound those that would not end the output."""
        self._matcher.fill_next_token_bitmask(self._bitmask)
        bitmask = self._bitmask
        for ending in self._endings_wanted():
            narrowed = bitmask & ending
            if bool(narrowed.any()):  # else the grammar needs more first: left to it
                bitmask = narrowed
                break
        self._xgrammar.apply_token_bitmask_inplace(logits.view(1, -1), bitmask.to(logits.device))

    def _endings_wanted(self) -> list[torch.Tensor]:
        """The token sets to narrow to, the first that the grammar allows any of."""
        scanner, endings = self._scanner, self._endings
        if scanner.in_string:
            closing = scanner.string_full or (scanner.winding_up and not scanner.escaped)
            return [endings.string] if closing else []
        if scanner.winding_up:
            return [endings.container, endings.scalar]
        return [endings.scalar] if scanner.number_full else []

    def writes_structure(self, token: int) -> bool:
        """Whether ``token``, written next, lays out JSON structure (``writes_structure``)."""
        scanner = self._scanner
        return writes_structure(
            self._vocab[token],
            scanner.in_string,
            scanner.escaped,
            scanner.in_name,
            scanner.name_next,
        )

    @property
    def in_value_string(self) -> bool:
        """A value's string is open (not a member's name)."""
        return self._scanner.in_string and not self._scanner.in_name

    def string_endings(self, token: int) -> torch.Tensor | None:
        """Where ``token``, written next, closes the open value string: every token that
        closes it with the same text (each then laying out something else, or nothing),
        else None."""
        if not self.in_value_string or self._scanner.escaped:
            return None
        text = _closing_text(self._vocab[token])
        return None if text is None else self._endings.closing_with[text]

    def forced_text(self) -> str:
        """The text the grammar allows alone from here (a member's name and its colon, the
        closing brackets), which no choice of the model can change; empty where it has a
        choice. Checked as a draft (``backend.engines.llamacpp_drafts``): SGLang's
        jump-forward decoding, kept to the tokens the model itself chooses."""
        return self._matcher.find_jump_forward_string()

    @property
    def string_tokens(self) -> list[int]:
        """The tokens written since the open string began (the one that opened it first);
        empty outside strings. What a drawn value must not loop over
        (``backend.engines.sampling``)."""
        return self._string_tokens

    def accept(self, token: int) -> None:
        if not self._matcher.accept_token(token):
            raise RuntimeError(f"token {token} breaks the constraint it was chosen under")
        scanner = self._scanner
        opened = scanner.strings_opened
        scanner.feed(self._vocab[token])
        if not scanner.in_string:
            self._string_tokens = []
        elif scanner.strings_opened != opened:  # this token opened the string
            self._string_tokens = [token]
        else:
            self._string_tokens.append(token)
