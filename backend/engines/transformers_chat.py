"""A chat engine on a transformers causal language model, on a GPU or the CPU.

The decode loop is written out rather than using ``model.generate``: the service streams each
token the moment it is chosen, stops within one token when asked (stop sequences, a client that
went away), and chooses tokens with the same code for greedy, seeded and schema-constrained
decoding as the llama.cpp engine. Concurrent requests are decoded together, one forward pass
for all of them (``backend.engines.transformers_runner``, which says why not with transformers'
own continuous batching); the engine is thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import torch
from transformers import AutoModelForCausalLM

from backend.engines.base import JSONSchemaConstraint, SamplingParams
from backend.engines.lifetime import release_once
from backend.engines.request_runner import (
    RunnerChatEngine,
    checked_prompt,
    default_parallel,
    flag_from_env,
    positive_from_env,
    runs_alone,
)
from backend.engines.sampling import TokenChooser
from backend.engines.token_mask import ConstraintMasks, masks_available
from backend.engines.torch_placement import load_pretrained
from backend.engines.transformers_runner import TransformersRunner
from backend.engines.transformers_slots import SlotRunner

logger = logging.getLogger(__name__)

#: Most tokens one generation holds in the slot cache (``CORE_SLOT_LENGTH``), when the model
#: allows as many: every slot is allocated at this length up front.
DEFAULT_SLOT_LENGTH = 4096


def _as_ids(value: int | Sequence[int] | None) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, int):
        return {value}
    return {int(v) for v in value}


class TransformersChatEngine(RunnerChatEngine):
    """Runs ``AutoModelForCausalLM`` from a local folder or a Hugging Face model id.

    Args:
        model_path: a local folder or a Hugging Face model id.
        device / dtype: where and in which precision (``torch_placement.load_pretrained``).
        parallel: requests decoded together at most (default ``CORE_CHAT_PARALLEL``, as for
            the llama.cpp engine); more wait for a place.
        deterministic: decode one request at a time (default ``CORE_DETERMINISTIC``): a
            generation alone runs unpadded, so its tokens do not depend on what else runs.
        cuda_graphs: decode over a static slot cache with waiting prompts prefilled together,
            the decode step captured as CUDA graphs on a GPU (``SlotRunner``; default
            ``CORE_CUDA_GRAPHS``, and when that is unset, on for a CUDA device: on an H200 the
            service gave 210 tokens/s to one stream and 7,727 to 64 on it, 33 and 374 on the
            default runner, benchmarks/README.md).
            On a CPU the same runner runs eagerly. Each generation then holds at most
            ``CORE_SLOT_LENGTH`` tokens (default ``DEFAULT_SLOT_LENGTH``), the engine's context
            length.
    """

    supports_constraints = masks_available()

    def __init__(
        self,
        model_path: str,
        device: str | None = None,
        dtype: str | None = None,
        parallel: int | None = None,
        deterministic: bool | None = None,
        cuda_graphs: bool | None = None,
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
        self._masks: ConstraintMasks | None = None  # built on the first constrained call
        self._masks_lock = threading.Lock()
        parallel = parallel or default_parallel()
        if runs_alone(deterministic):
            parallel = 1
        if flag_from_env("CORE_CUDA_GRAPHS", cuda_graphs, unset=self.device.startswith("cuda")):
            length = positive_from_env("CORE_SLOT_LENGTH") or DEFAULT_SLOT_LENGTH
            self.context_length = min(self.context_length, length)
            self._runner = SlotRunner(
                self.model, self.device, parallel, self.context_length, graphs=True
            )
        else:
            self._runner = TransformersRunner(self.model, self.device, slots=parallel)
        #: Stops the runner's thread (``close``, or unclosed at collection or interpreter exit,
        #: where a forward pass still running would abort the process:
        #: ``backend.engines.lifetime``).
        self._release = release_once(self, self._runner)
        logger.info(
            "chat model %s: %s on %s, context %d, eos ids %s, %d requests at once",
            model_path,
            self.model.dtype,
            self.device,
            self.context_length,
            sorted(eos),
            parallel,
        )

    def _chooser(
        self, params: SamplingParams, constraint: JSONSchemaConstraint | None
    ) -> Callable[[torch.Tensor], int]:
        """How one generation picks each token from its row of logits (on the runner's
        thread, which alone touches the mask and the generator)."""
        mask = None
        if constraint is not None:
            with self._masks_lock:
                if self._masks is None:
                    vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
                    self._masks = ConstraintMasks(self.tokenizer, vocab_size, self.eos_token_ids)
            mask = self._masks.start(constraint)
        generator = None
        if not params.greedy and params.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(params.seed)
        return TokenChooser(params, mask, generator)

    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        """Log-probabilities of each candidate as the next token (see
        ``next_token_logprobs_many``)."""
        return self.next_token_logprobs_many([prompt_ids], candidate_ids)[0]

    def next_token_logprobs_many(
        self, prompts: Sequence[Sequence[int]], candidate_ids: Sequence[int]
    ) -> list[list[float]]:
        """For each prompt, the candidates' log-probabilities as its next token: the prompts,
        with those other callers submitted meanwhile, are scored together between two decode
        steps, their shared beginnings evaluated once (``backend.engines.prompt_tree``)."""
        candidates = list(candidate_ids)

        def logprobs(logits: torch.Tensor) -> list[float]:
            return torch.log_softmax(logits, dim=-1)[candidates].tolist()

        checked = [checked_prompt(prompt) for prompt in prompts]
        return self._runner.score_many(checked, logprobs)

    def close(self) -> None:
        self._release()
