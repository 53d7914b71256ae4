"""A chat engine on a transformers causal language model, decoding one token at a time.

The decode loop is written out rather than using ``model.generate``: the service streams each
token the moment it is chosen, stops within one token when asked (stop sequences, a client that
went away), and needs the same loop for greedy and seeded sampling. The KV cache makes every
step after the prompt a one-token forward pass.

Not thread-safe: one engine runs one request at a time, callers serialise access.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence

import torch
from transformers import AutoModelForCausalLM, DynamicCache

from backend.engines.base import ChatEngine, JSONSchemaConstraint, SamplingParams
from backend.engines.sampling import choose_token
from backend.engines.token_mask import ConstraintMasks, masks_available
from backend.engines.torch_placement import load_pretrained

logger = logging.getLogger(__name__)


def _as_ids(value: int | Sequence[int] | None) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, int):
        return {value}
    return {int(v) for v in value}


class TransformersChatEngine(ChatEngine):
    """Runs ``AutoModelForCausalLM`` from a local folder or a Hugging Face model id."""

    supports_constraints = masks_available()
    _masks: ConstraintMasks | None = None  # built on the first constrained call

    def __init__(
        self, model_path: str, device: str | None = None, dtype: str | None = None
    ) -> None:
        self.tokenizer, self.model, self.device = load_pretrained(
            AutoModelForCausalLM, model_path, device, dtype
        )
        config = self.model.config
        self.context_length = int(
            getattr(config, "max_position_embeddings", None) or self.tokenizer.model_max_length
        )
        eos = _as_ids(self.model.generation_config.eos_token_id)
        eos |= _as_ids(getattr(self.tokenizer, "eos_token_id", None))
        if not eos:
            raise ValueError(f"{model_path} names no end-of-sequence token")
        self.eos_token_ids = frozenset(eos)
        logger.info(
            "chat model %s: %s on %s, context %d, eos ids %s",
            model_path,
            self.model.dtype,
            self.device,
            self.context_length,
            sorted(eos),
        )

    def _prompt_tensor(self, prompt_ids: Sequence[int]) -> torch.Tensor:
        if not prompt_ids:
            raise ValueError("the prompt holds no tokens")
        return torch.tensor([list(prompt_ids)], dtype=torch.long, device=self.device)

    def _last_logits(self, input_ids: torch.Tensor, cache: DynamicCache | None) -> torch.Tensor:
        """Float32 logits of the last position only: the other positions' logits are never used."""
        # Scoped to the forward pass, never around a yield: the mode is thread-local, and a
        # caller may resume the generator on another thread.
        with torch.inference_mode():
            output = self.model(
                input_ids=input_ids,
                past_key_values=cache,
                use_cache=cache is not None,
                logits_to_keep=1,
            )
            return output.logits[0, -1].float()

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
        constraint: JSONSchemaConstraint | None = None,
    ) -> Generator[int, None, None]:
        """Yield token ids one at a time; see ``ChatEngine.generate``.

        With ``constraint``, each step's logits are masked so the output stays valid against
        its schema.
        """
        input_ids = self._prompt_tensor(prompt_ids)
        mask = None
        if constraint is not None:
            if self._masks is None:
                vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
                self._masks = ConstraintMasks(self.tokenizer, vocab_size, self.eos_token_ids)
            mask = self._masks.start(constraint)
        budget = min(params.max_new_tokens, self.context_length - input_ids.shape[1])
        generator = None
        if not params.greedy and params.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(params.seed)
        cache = DynamicCache()
        try:
            for _ in range(budget):
                if should_stop():
                    return
                token = choose_token(self._last_logits(input_ids, cache), params, mask, generator)
                yield token
                if token in self.eos_token_ids:
                    return
                input_ids = torch.tensor([[token]], dtype=torch.long, device=self.device)
        finally:
            # Runs on close() too: drops the KV cache now, not when the generator is collected.
            del cache

    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        """Log-probabilities of each candidate as the next token, from one forward pass."""
        input_ids = self._prompt_tensor(prompt_ids)
        logprobs = torch.log_softmax(self._last_logits(input_ids, None), dim=-1)
        return logprobs[list(candidate_ids)].tolist()
