"""The small interfaces every model engine implements.

Everything above the engines (chat templates, tool-call parsing, streaming post-processing,
validation, groundedness, embedding windows) is shared; an engine only turns token ids into
token ids (chat) or token windows into vectors (embeddings). Engines know nothing of the
service's wire protocol: what the chat layer asks of them is said in the types below.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from backend.engines.json_bounds import JSONBounds


@dataclass(frozen=True)
class JSONSchemaConstraint:
    """Output that must be one JSON value valid against a schema, then the end of the turn.

    The schema's text is the key under which engines cache its compiled grammar; keys are
    written in the order the output must follow. ``strict``: objects hold only the properties
    the schema names (OpenAI's strict mode); off, ``{"type": "object"}`` is any object.
    ``indent``: the output is laid out with this many spaces per level, a member per line;
    None: on one line. ``items``: a top-level array of objects is closed once it has this
    many (``JSONBounds.items``).
    """

    schema_json: str
    strict: bool = True
    indent: int | None = None
    items: int | None = None

    @property
    def schema(self) -> dict:
        return json.loads(self.schema_json)

    @property
    def bounds(self) -> JSONBounds:
        """How long the output may run before it is made to end (``json_bounds``)."""
        return replace(JSONBounds.for_schema(self.schema), items=self.items)


@dataclass(frozen=True)
class FavouredFirstToken:
    """A first token taken from ``tokens`` (the likeliest of them) whenever the model gives
    them together at least ``share`` of its probability, else the likeliest other token: a
    decision between two kinds of opening (a tool call or an answer,
    ``backend.chat.generation``) made at a threshold instead of by the likeliest token."""

    tokens: frozenset[int]
    share: float


@dataclass(frozen=True)
class SamplingParams:
    """How to pick the next tokens.

    Attributes:
        max_new_tokens: hard cap on generated tokens (the caller already clipped it to the
            context window).
        temperature: 0 means greedy decoding; otherwise softmax temperature.
        top_p: nucleus sampling mass in (0, 1]; 1 disables it.
        seed: optional seed that makes sampling reproducible.
        top_logprobs: None (the default) computes no log-probabilities; a number from 0 to
            20 makes ``generate`` yield ``ScoredToken`` ids carrying each token's
            log-probability and those of the ``top_logprobs`` most likely tokens
            (``backend.engines.logprobs``).
        greedy_opening: at most this many first tokens are chosen greedily whatever the
            temperature (``backend.engines.sampling.TokenChooser``).
        opening_decided: ends the greedy opening early: called with the tokens chosen so
            far (on the engine's thread), it returns True once they carry the decision the
            opening is greedy for; the tokens after are drawn as asked.
        evaluated_apart: the prompt's first so many tokens are evaluated as that prompt
            alone is, the rest after them, so that an engine caching that prompt reuses it
            whole (a tool call generated from the answer's prompt and the call's opening,
            ``backend.chat.generation``); the llama.cpp engine does, others may evaluate the
            prompt whole. 0: the prompt as a whole.
        draft: tokens the generation is likely to write first (a call that repeats the
            conversation's last one, ``backend.chat.generation``). An engine that can checks
            them in one evaluation and keeps the tokens its choices agree with, each chosen
            from its row as a decode step would (the llama.cpp engine; prompt-lookup
            decoding): the same tokens, drawn from the same distributions, in fewer steps.
            Others ignore it.
        draft_from_prompt: the generation is likely to copy runs of its prompt (an answer
            that restates the question and the tool results): an engine that can drafts, at
            each step, the tokens that followed its last few tokens where they appeared
            before (``backend.engines.prompt_lookup``) and checks them as it checks a
            ``draft``. Others ignore it.
        continued_later: a later request may continue this prompt (the conversation's next
            turn), so an engine that caches prompts cuts its evaluation where that request
            can reuse it (the llama.cpp engine: before every message's first token, in
            chunks of their own); False for a prompt no request continues (the answer from
            tool results without tools), evaluated in whole chunks.
        first_token: how the first token is chosen where it decides between two kinds of
            opening (``FavouredFirstToken``); None: as the other opening tokens are.
    """

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    top_logprobs: int | None = None
    greedy_opening: int = 0
    opening_decided: Callable[[Sequence[int]], bool] | None = None
    evaluated_apart: int = 0
    draft: tuple[int, ...] = ()
    draft_from_prompt: bool = False
    continued_later: bool = True
    first_token: FavouredFirstToken | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


class ChatEngine(abc.ABC):
    """Runs a causal language model: prompt token ids in, generated token ids out."""

    #: A Hugging Face tokenizer carrying the model's chat template (``apply_chat_template``).
    tokenizer: object
    #: Maximum number of tokens (prompt plus generated) the model accepts.
    context_length: int
    #: Token ids that end a turn (EOS, ``<|im_end|>``, ...).
    eos_token_ids: frozenset[int]
    #: Where the model runs, e.g. ``"cpu"`` or ``"cuda:0"``.
    device: str
    #: Whether ``generate`` takes ``constraint=`` (a ``JSONSchemaConstraint``) and keeps the
    #: output to it.
    supports_constraints: bool = False
    #: Whether several threads may generate and score at once (the engine batches them);
    #: otherwise callers take turns.
    thread_safe: bool = False
    #: Whether prompts are evaluated with quantized CPU kernels (llama.cpp's): a bf16 copy of
    #: the model evaluates them faster on AMX CPUs, and the two give slightly different
    #: probabilities (see ``backend.engines.selection.judge_reads_with_copy``).
    quantized_prompt_evaluation: bool = False

    @abc.abstractmethod
    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Generator[int, None, None]:
        """Yield generated token ids one at a time, as soon as each is decoded.

        The iterator yields the end-of-turn token too when the model produces one, and then
        ends; it ends without one after ``params.max_new_tokens`` tokens (with
        ``params.top_logprobs`` set, each id is a ``ScoredToken``). ``should_stop`` is
        polled before every decoding step so a caller (a stop sequence, a disconnected client)
        can end generation within one token. Closing the iterator early must free its state.
        """

    @abc.abstractmethod
    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        """Log-probabilities of each candidate token as the next token after the prompt."""

    def next_token_logprobs_many(
        self, prompts: Sequence[Sequence[int]], candidate_ids: Sequence[int]
    ) -> list[list[float]]:
        """``next_token_logprobs`` of each prompt, in order; an engine that can evaluate them
        together (sharing their common beginnings) does."""
        return [self.next_token_logprobs(prompt, candidate_ids) for prompt in prompts]

    #: Whether ``next_token_readings_many`` returns hidden states (the judge's learned
    #: reading needs them).
    reads_hidden_states: bool = False

    def next_token_readings_many(
        self, prompts: Sequence[Sequence[int]], candidate_ids: Sequence[int]
    ) -> list[tuple[list[float], np.ndarray]]:
        """Each prompt's ``next_token_logprobs`` and the model's final hidden state (after
        its last norm) at the prompt's last token: what a learned reading of the model's
        answer reads (``backend.groundedness.learned``).

        Raises:
            NotImplementedError: this engine cannot expose its hidden states.
        """
        raise NotImplementedError(f"{type(self).__name__} does not expose hidden states")

    def reading_before_generation(
        self, prompt: Sequence[int], candidate_ids: Sequence[int]
    ) -> tuple[list[float], np.ndarray]:
        """``next_token_readings_many`` of one prompt about to be generated from. An engine
        that caches prompts evaluates it as the generation will (``LlamaCppChatEngine``), so
        that the generation reuses it; others score it as any prompt.

        Raises:
            NotImplementedError: this engine cannot expose its hidden states.
        """
        [reading] = self.next_token_readings_many([prompt], candidate_ids)
        return reading

    def close(self) -> None:
        """Free the model; the engine is unusable afterwards."""


class EmbeddingEngine(abc.ABC):
    """Runs a bidirectional encoder: windows of token ids in, one vector per window out."""

    #: Dimensionality of the produced vectors.
    dimensions: int
    #: The encoder's window, special tokens included (512 for e5).
    max_window_tokens: int
    #: Where the model runs, e.g. ``"cpu"`` or ``"cuda:0"``.
    device: str

    @abc.abstractmethod
    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Content token ids of each text, without special tokens and without truncation."""

    @abc.abstractmethod
    def embed_windows(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        """Mean-pooled, not yet normalised hidden states, one row per window.

        Each window holds at most ``max_window_tokens - 2`` content ids; the engine adds the
        model's begin and end tokens itself. Returns float32, shape ``(len(windows), dimensions)``.
        """

    def close(self) -> None:
        """Free the model; the engine is unusable afterwards."""


class FactChecker(abc.ABC):
    """Runs a model trained to say whether a document supports a claim (a fact-checker such
    as MiniCheck, or an NLI model), each (document, claim) pair fed as its authors feed it
    (``backend.engines.fact_checkers``); the groundedness judge reads it instead of asking a
    chat model its questions."""

    #: ``classifier`` or ``seq2seq`` (``backend.engines.judge_kinds``).
    kind: str
    #: The largest document chunk its authors feed it at once, in ``count_tokens``' units.
    chunk_tokens: int
    #: Where the model runs, e.g. ``"cpu"`` or ``"cuda:0"``.
    device: str
    #: Callers take turns.
    thread_safe: bool = False

    @abc.abstractmethod
    def supports(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, int]]:
        """For each (document, claim): the probability that the document supports the claim,
        and the tokens read for it; the pairs are read in batches."""

    @abc.abstractmethod
    def count_tokens(self, text: str) -> int:
        """The size of ``text`` in the units of ``chunk_tokens`` (for cutting documents)."""

    def close(self) -> None:
        """Free the model; the checker is unusable afterwards."""
