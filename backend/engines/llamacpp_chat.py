"""A chat engine on llama.cpp: runs a GGUF file as it is, without dequantizing it.

On a CPU, decoding one stream is bound by memory bandwidth: every token reads all weights.
llama.cpp reads the 4-bit Q4_K_M weights directly (a quarter of bf16's bytes) with hand-tuned
kernels, which makes it several times faster than transformers on the dequantized weights
(see ``benchmarks/``). Everything above the engine (chat template, tool-call parsing, stop
strings, streaming) is shared with the transformers engine: this class only turns token ids
into token ids, with the Hugging Face tokenizer built from the same GGUF vocabulary.

Concurrent requests are decoded together, one batched step for all of them
(``backend.engines.llamacpp_batching``); the engine is thread-safe. Tokens are chosen here,
from the logits, by the same code for greedy, sampled and schema-constrained decoding.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backend.engines.base import JSONSchemaConstraint, SamplingParams
from backend.engines.lifetime import release_once
from backend.engines.llamacpp_runner import BatchingRunner
from backend.engines.prompt_tree import shared_prefix_groups
from backend.engines.request_runner import (
    RunnerChatEngine,
    checked_prompt,
    default_parallel,
    positive_from_env,
    runs_alone,
)
from backend.engines.sampling import TokenChooser
from backend.engines.token_mask import ConstraintMasks, TokenMask, masks_available

logger = logging.getLogger(__name__)

#: Largest context allocated by default: the KV cache is allocated up front, and the service's
#: own limits stay below it. All running requests share it.
DEFAULT_MAX_CONTEXT = 32768
#: Tokens llama.cpp evaluates per call at most (a decode step of every request, a prompt chunk,
#: the suffixes of prompts sharing a prefix).
_BATCH_TOKENS = 512
#: Prompts sharing a prefix whose ends are scored in one evaluation at most, each in a llama.cpp
#: sequence of its own (the judge reads up to 8 claims with 2 questions against a chunk).
SUFFIX_SEQUENCES = 16
#: Longest end, after a shared prefix, scored that way; longer ones are prompts of their own.
SUFFIX_TOKENS = 256


@dataclass(frozen=True)
class _RowChooser:
    """A ``TokenChooser`` fed llama.cpp's rows of logits, with the mask it keeps to."""

    chooser: TokenChooser
    mask: TokenMask | None

    def __call__(self, logits: np.ndarray) -> int:
        import torch

        return self.chooser(torch.from_numpy(logits.copy()))


def default_threads() -> int:
    """``CORE_CHAT_THREADS`` when set, else every core this process may run on.

    llama-cpp-python's own default is half the cores, which leaves half of a small machine idle.
    """
    configured = positive_from_env("CORE_CHAT_THREADS")
    if configured:
        return configured
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def llama_cpp_has_amx() -> bool:
    """Whether the installed llama.cpp was built with its AMX kernels."""
    import llama_cpp

    return b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()


def cpu_safe_model_params(params):
    """``params`` (llama.cpp model parameters) without the AMX weight buffers where built in.

    A llama.cpp built on a CPU with AMX (Sapphire Rapids and later) moves the weights into AMX
    buffers, and on the virtual machines we run on, its first AMX instruction (``ldtilecfg``)
    kills the process with a segmentation fault. Turning off the extra buffer types (llama.cpp's
    ``--no-extra-bufts``) avoids them, at the price of the repacked layouts that speed up
    prompt evaluation; ``make install`` therefore builds llama.cpp without AMX, keeping those.
    """
    if llama_cpp_has_amx():
        params.use_extra_bufts = False
    return params


def message_start_tokens(tokenizer: object) -> frozenset[int]:
    """The special token the chat template opens each message with (ChatML's ``<|im_start|>``,
    Llama 3's ``<|start_header_id|>``): the first token of the header a generation prompt
    adds. Empty where the template adds none or it opens with an ordinary token, and then
    prompts are cut at whole chunks only (``backend.engines.llamacpp_slots.chunk_ends``)."""
    conversation = [{"role": "user", "content": "Hi"}]
    try:
        render = tokenizer.apply_chat_template  # type: ignore[attr-defined]
        with_header = render(conversation, add_generation_prompt=True, tokenize=False)
        without = render(conversation, add_generation_prompt=False, tokenize=False)
        header = tokenizer.encode(with_header[len(without) :], add_special_tokens=False)  # type: ignore[attr-defined]
        special = tokenizer.added_tokens_decoder  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - no template, or not a Hugging Face tokenizer
        return frozenset()
    if not with_header.startswith(without) or not header:
        return frozenset()
    opening = special.get(header[0])
    return frozenset({header[0]}) if opening is not None and opening.special else frozenset()


class LlamaCppChatEngine(RunnerChatEngine):
    """Runs a GGUF chat model with llama.cpp on the CPU, batching concurrent requests.

    Output can be constrained: given a ``JSONSchemaConstraint``, ``generate`` chooses only
    tokens that keep the output valid against its schema (``backend.engines.token_mask``).

    Args:
        gguf_path: the model file.
        tokenizer: a Hugging Face tokenizer with the model's vocabulary and chat template.
        eos_token_ids: the ids that end a turn.
        threads: CPU threads for decoding and prefill (default: ``default_threads()``).
        max_context: cap on the context allocated (default ``DEFAULT_MAX_CONTEXT``).
        parallel: requests decoded together at most (default ``default_parallel()``).
        deterministic: run each request alone, so that its numbers depend on nothing else
            (default ``CORE_DETERMINISTIC``). Either way a request that arrives while none
            runs reads what a fresh engine reads (``backend.engines.llamacpp_runner``).
    """

    supports_constraints = masks_available()
    quantized_prompt_evaluation = True
    reads_hidden_states = True

    def __init__(
        self,
        gguf_path: str | Path,
        tokenizer: object,
        eos_token_ids: frozenset[int],
        threads: int | None = None,
        max_context: int = DEFAULT_MAX_CONTEXT,
        parallel: int | None = None,
        deterministic: bool | None = None,
    ) -> None:
        import llama_cpp
        from llama_cpp._internals import LlamaContext, LlamaModel

        self.tokenizer = tokenizer
        self.eos_token_ids = frozenset(eos_token_ids)
        self.device = "cpu"
        self.threads = threads or default_threads()
        parallel = parallel or default_parallel()
        # llama-cpp-python prints every llama.cpp log line to stderr unless its logger has a
        # level; ``Llama(verbose=False)`` sets ERROR, which (its table of llama.cpp's levels
        # being one off) lets warnings through. The lower-level classes used here set none.
        native_log = logging.getLogger("llama-cpp-python")
        if native_log.level == logging.NOTSET:
            native_log.setLevel(logging.ERROR)
        self._model = LlamaModel(
            path_model=str(gguf_path),
            params=cpu_safe_model_params(llama_cpp.llama_model_default_params()),
            verbose=False,
        )
        trained = self._model.n_ctx_train()
        self.context_length = min(trained, max_context) if trained > 0 else max_context
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = self.context_length
        params.n_batch = params.n_ubatch = _BATCH_TOKENS
        params.n_seq_max = parallel + SUFFIX_SEQUENCES
        params.kv_unified = True  # one cache for all requests: any of them may use all of it
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        self._context = LlamaContext(model=self._model, params=params, verbose=False)
        self._vocab_size = self._model.n_vocab()
        self._runner = BatchingRunner(
            self._context.ctx,
            self._vocab_size,
            slots=parallel,
            kv_cells=self.context_length,
            suffix_sequences=SUFFIX_SEQUENCES,
            batch_tokens=_BATCH_TOKENS,
            one_at_a_time=runs_alone(deterministic),
            n_embd=self._model.n_embd(),
            message_starts=message_start_tokens(tokenizer),
        )
        #: Stops the runner's thread, then frees the context and the model (``close``, or
        #: unclosed at collection or exit: ``backend.engines.lifetime``).
        self._release = release_once(self, self._runner, self._context, self._model)
        self._masks: ConstraintMasks | None = None  # built on the first constrained call
        logger.info(
            "chat model %s: llama.cpp on cpu, %d threads, context %d, %d requests at once",
            gguf_path,
            self.threads,
            self.context_length,
            parallel,
        )

    def _chooser(
        self, params: SamplingParams, constraint: JSONSchemaConstraint | None
    ) -> Callable[[np.ndarray], int]:
        """How one generation picks each token from its row of logits."""
        mask = None
        if constraint is not None:
            if self._masks is None:
                self._masks = ConstraintMasks(self.tokenizer, self._vocab_size, self.eos_token_ids)
            mask = self._masks.start(constraint)
        if (
            mask is None
            and params.greedy
            and params.top_logprobs is None
            and params.first_token is None
        ):
            return lambda logits: int(np.argmax(logits))
        import torch

        generator = None
        if not params.greedy:
            seed = params.seed if params.seed is not None else _fresh_seed()
            generator = torch.Generator().manual_seed(seed)

        return _RowChooser(TokenChooser(params, mask, generator), mask)

    def _forced_tokens(self, choose: Callable[[np.ndarray], int]) -> Callable[[], list[int]] | None:
        """The tokens of the text the constraint allows alone next (``TokenMask.forced_text``),
        which the runner checks as a draft while the request runs alone
        (``backend.engines.llamacpp_drafts``; what it saves a tool call: benchmarks/README.md,
        "Agents that chain tools")."""
        mask = choose.mask if isinstance(choose, _RowChooser) else None
        if mask is None:
            return None
        encode = self.tokenizer.encode

        def forced() -> list[int]:
            text = mask.forced_text()
            return encode(text, add_special_tokens=False) if text else []

        return forced

    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        """Log-probabilities of each candidate as the next token after the prompt."""
        logprobs = _candidate_logprobs(candidate_ids)
        return self._runner.score(checked_prompt(prompt_ids), logprobs)  # type: ignore[return-value]

    def next_token_logprobs_many(
        self, prompts: Sequence[Sequence[int]], candidate_ids: Sequence[int]
    ) -> list[list[float]]:
        """``next_token_logprobs`` of each prompt: prompts that share a beginning are scored
        as that beginning, evaluated once, and their short ends on top of it, all in one
        evaluation (``prompt_tree.shared_prefix_groups``, ``BatchingRunner.score_suffixes``).
        """
        return self._score_grouped(prompts, _candidate_logprobs(candidate_ids), hidden=False)

    def next_token_readings_many(
        self, prompts: Sequence[Sequence[int]], candidate_ids: Sequence[int]
    ) -> list[tuple[list[float], np.ndarray]]:
        """Each prompt's candidates' log-probabilities and the model's final hidden state at
        its last token, scored as ``next_token_logprobs_many`` scores them."""
        return self._score_grouped(prompts, _candidate_reading(candidate_ids), hidden=True)

    def reading_before_generation(
        self, prompt: Sequence[int], candidate_ids: Sequence[int]
    ) -> tuple[list[float], np.ndarray]:
        """``next_token_readings_many`` of one prompt, cut into chunks as a generation's
        prompt is (also before every message's first token, ``llamacpp_slots.chunk_ends``).
        It reuses what the conversation's last generation left up to its last message, not
        only whole chunks, and a generation from the same prompt then reuses all of it but
        its last message's opening (``<|im_start|>assistant``)."""
        checked = checked_prompt(prompt)
        [[reading]] = self._runner.score_suffixes(
            [(checked[:-1], [checked[-1:]])],
            _candidate_reading(candidate_ids),
            hidden=True,
            cut_as_generation=True,
        )
        return reading

    def _score_grouped(self, prompts: Sequence[Sequence[int]], score, hidden: bool) -> list:
        """``score`` after each prompt, the prompts grouped by their shared beginnings.

        The first group is scored before the others are submitted, so that what all prompts
        share (the judge's instructions) is in the cache for them to reuse.
        """
        checked = [checked_prompt(prompt) for prompt in prompts]
        groups = shared_prefix_groups(checked, SUFFIX_TOKENS)
        results: list = [None] * len(checked)
        for batch in (groups[:1], groups[1:]):
            scored = self._runner.score_suffixes(
                [(checked[ms[0]][:n], [checked[m][n:] for m in ms]) for n, ms in batch],
                score,
                hidden=hidden,
            )
            for (_, members), values in zip(batch, scored, strict=True):
                for member, value in zip(members, values, strict=True):
                    results[member] = value
        return results

    def close(self) -> None:
        self._release()


def _candidate_logprobs(candidate_ids: Sequence[int]) -> Callable[[np.ndarray], list[float]]:
    """What turns a row of logits into the candidates' log-probabilities."""
    candidates = list(candidate_ids)

    def logprobs(logits: np.ndarray) -> list[float]:
        shifted = logits.astype(np.float64) - float(logits.max())
        log_normaliser = np.log(np.exp(shifted).sum())
        return [float(shifted[i] - log_normaliser) for i in candidates]

    return logprobs


def _candidate_reading(
    candidate_ids: Sequence[int],
) -> Callable[[np.ndarray, np.ndarray], tuple[list[float], np.ndarray]]:
    """What turns a row of logits and its hidden state into (the candidates'
    log-probabilities, the hidden state)."""
    logprobs = _candidate_logprobs(candidate_ids)
    return lambda logits, hidden: (logprobs(logits), hidden)


def _fresh_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")
