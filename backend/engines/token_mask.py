"""Per-step token masks that keep generated output inside a JSON Schema (xgrammar).

xgrammar compiles a JSON Schema against the tokenizer's vocabulary once, then tells, in tens
of microseconds per step, which tokens may come next. Both engines apply the mask to the
logits before choosing a token, so greedy and sampled output alike always parses and
validates. When the value is complete only an end-of-turn token is allowed, so the model ends
there. (llama.cpp's own grammar sampler also works, but checks the whole vocabulary at every
step, many times slower than the mask (benchmarks/README.md), and the transformers engine
would still need another library.)
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterable

import torch

from backend.engines.base import JSONSchemaConstraint

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

    def start(self, constraint: JSONSchemaConstraint) -> TokenMask | None:
        """A fresh mask, or None when xgrammar cannot compile the schema.

        Some valid schemas use what xgrammar does not support (a regex lookbehind, an
        unresolvable ``$ref``): such output is generated unconstrained rather than failing
        the request.
        """
        try:
            # The compiler caches compiled schemas: the same tools compile once.
            compiled = self._compiler.compile_json_schema(
                constraint.schema_json, any_whitespace=False, strict_mode=constraint.strict
            )
        except RuntimeError as error:
            logger.warning("output left unconstrained: xgrammar cannot compile it: %s", error)
            return None
        return TokenMask(self._xgrammar, self._xgrammar.GrammarMatcher(compiled), self._info)


class TokenMask:
    """The allowed next tokens of one generation; ``accept`` each token chosen."""

    def __init__(self, xgrammar, matcher, info) -> None:
        self._xgrammar = xgrammar
        self._matcher = matcher
        self._bitmask = xgrammar.allocate_token_bitmask(1, info.vocab_size)

    def apply(self, logits: torch.Tensor) -> None:
        """Set the logits of forbidden tokens to -inf, in place (a 1-D float32 CPU tensor)."""
        self._matcher.fill_next_token_bitmask(self._bitmask)
        self._xgrammar.apply_token_bitmask_inplace(
            logits.view(1, -1), self._bitmask.to(logits.device)
        )

    def accept(self, token: int) -> None:
        if not self._matcher.accept_token(token):
            raise RuntimeError(f"token {token} breaks the constraint it was chosen under")
