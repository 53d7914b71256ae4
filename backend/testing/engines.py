"""Engines that run no model: a character-level tokenizer, scripted chat engines and a
letter-counting embedding engine.

They let everything above the engines (validation, tool calls, streaming, the server, the
adapters) be tested in milliseconds, offline; behaviour on real models is tested separately.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np

from backend.engines.base import ChatEngine, EmbeddingEngine, JSONSchemaConstraint, SamplingParams
from backend.engines.logprobs import ScoredToken

EOS = 0


class CharTokenizer:
    """One token per character (id = code point); id 0 is the end of turn."""

    chat_template = "plain"
    eos_token_id = EOS

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids if i != EOS)

    def apply_chat_template(
        self, conversation, tools=None, add_generation_prompt=True, tokenize=False
    ):
        lines = [f"{m['role']}: {m['content']}" for m in conversation]
        if tools:
            lines.insert(0, "tools: " + ",".join(t["function"]["name"] for t in tools))
        return "\n".join(lines) + "\nassistant: "


class ScriptedChatEngine(ChatEngine):
    """Answers every prompt with ``reply`` (then EOS), one character per token.

    Args:
        reply: the answer to every prompt.
        context_length: the context it claims.
        token_delay: seconds slept before each token (a slow model).
        constrains: claims to constrain decoding (``supports_constraints``): it records each
            constraint given in ``constraints`` and answers ``reply`` all the same, so script
            a reply that fits. Every generation's ``SamplingParams`` are kept in ``params``.
    """

    def __init__(
        self,
        reply: str = "Hello there.",
        context_length: int = 4096,
        token_delay: float = 0.0,
        constrains: bool = False,
    ) -> None:
        self.tokenizer = CharTokenizer()
        self.context_length = context_length
        self.eos_token_ids = frozenset({EOS})
        self.device = "cpu"
        self.reply = reply
        self.token_delay = token_delay
        self.generated = 0
        self.prompts: list[list[int]] = []
        if constrains:
            self.supports_constraints = True
        self.constraints: list[JSONSchemaConstraint | None] = []
        self.params: list[SamplingParams] = []

    def reply_for(self, prompt: str) -> str:
        return self.reply

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
        constraint: JSONSchemaConstraint | None = None,
    ) -> Generator[int, None, None]:
        self.prompts.append(list(prompt_ids))
        self.constraints.append(constraint)
        self.params.append(params)
        reply = self.reply_for(self.tokenizer.decode(prompt_ids))
        for i, token in enumerate([ord(c) for c in reply] + [EOS]):
            if i >= params.max_new_tokens or should_stop():
                return
            if self.token_delay:
                time.sleep(self.token_delay)
            self.generated += 1
            if params.top_logprobs is not None:
                # The script is certain: each token has all the probability.
                yield ScoredToken(token, 0.0, ((token, 0.0),) if params.top_logprobs else ())
            else:
                yield token

    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        # Says "yes" when the reply starts with "y", "no" otherwise, so tests script verdicts.
        return yes_or_no_logprobs(self.reply.startswith("y"), candidate_ids)


class EchoChatEngine(ScriptedChatEngine):
    """Answers from the request itself, so concurrent tests can check each answer is its own.

    Replies ``echo: <last user message>``; judges a groundedness claim supported exactly when
    the claim appears verbatim in its document. A user message containing ``OUT_OF_MEMORY``
    makes generation raise ``MemoryError``, standing for a model that ran out of memory.
    """

    OUT_OF_MEMORY = "OUT_OF_MEMORY"

    def __init__(self, token_delay: float = 0.0, context_length: int = 4096) -> None:
        super().__init__("", context_length, token_delay)

    @staticmethod
    def reply_to(user_content: str) -> str:
        return f"echo: {user_content}"

    def reply_for(self, prompt: str) -> str:
        last_user = prompt.rpartition("user: ")[2].removesuffix("\nassistant: ")
        if self.OUT_OF_MEMORY in last_user:
            raise MemoryError("out of memory while generating (fake)")
        return self.reply_to(last_user)

    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        # the document, claim and question of the judge's prompt
        prompt = self.tokenizer.decode(prompt_ids)
        document, _, rest = prompt.rpartition("Document:\n")[2].partition("\n\nClaim: ")
        claim, _, question = rest.partition("\n\n")
        supported = bool(claim) and claim in document
        # "yes" to the contrast question ("does the document contradict the claim?") is a no
        says_yes = supported if question.startswith("Is the claim supported") else not supported
        return yes_or_no_logprobs(says_yes, candidate_ids)


class TermOverlapJudgeEngine(ScriptedChatEngine):
    """A judge that runs no model: P(yes) to the support question is the share of the claim's
    terms (``groundedness.claims.terms``) found in the document, so supports spread over
    [0, 1] and a check's verdicts, early stops and corrections take every shape. With a real
    ``tokenizer`` (one with a chat template) the judge cuts contexts into chunks exactly as
    with that model, which is what ``benchmarks.judge.report_check --reader overlap`` needs to
    check the report's promises on every check of a set without a model."""

    def __init__(self, tokenizer: Any = None) -> None:
        super().__init__("")
        if tokenizer is not None:
            self.tokenizer = tokenizer
        from backend.chat.yes_no import YES_SPELLINGS

        encode = self.tokenizer.encode
        self._yes = {encode(s, add_special_tokens=False)[0] for s in YES_SPELLINGS}

    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        from backend.groundedness.claims import terms

        prompt = self.tokenizer.decode(prompt_ids)
        document, _, rest = prompt.rpartition("Document:\n")[2].partition("\n\nClaim: ")
        claim = rest.partition("\n\n")[0]
        wanted = terms(claim)
        share = len(wanted & terms(document)) / len(wanted) if wanted else 0.0
        p_yes = min(max(share, 1e-6), 1 - 1e-6)
        # spread over the candidates so that P(yes) renormalised over them is the share
        yes = [c for c in candidate_ids if c in self._yes]
        no = len(candidate_ids) - len(yes)
        return [
            math.log(p_yes / len(yes) if c in yes else (1 - p_yes) / max(no, 1))
            for c in candidate_ids
        ]


class ToolLoopEngine(ScriptedChatEngine):
    """One turn of an agent's tool loop: answers ``calls`` (a reply of tool calls) while the
    conversation holds no tool results, and then ``answer``, followed by every result line
    the prompt shows (``- name(arguments) returned: result``), so a test sees which calls the
    agent ran."""

    RESULT_MARK = " returned: "

    def __init__(self, calls: str, answer: str = "Done.") -> None:
        super().__init__(calls)
        self.answer = answer

    def reply_for(self, prompt: str) -> str:
        results = [line for line in prompt.splitlines() if self.RESULT_MARK in line]
        return "\n".join([self.answer, *results]) if results else self.reply


def yes_or_no_logprobs(yes: bool, candidate_ids: Sequence[int]) -> list[float]:
    """Log-probabilities that put (nearly) all mass on the first letter of "yes" or "no"."""
    first = ord("y") if yes else ord("n")
    return [0.0 if c == first else math.log(1e-3) for c in candidate_ids]


class CharCountEmbeddingEngine(EmbeddingEngine):
    """Vectors counting letters a-z, so similar texts point the same way."""

    dimensions = 26
    max_window_tokens = 16
    device = "cpu"

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return [[ord(c) for c in text] for text in texts]

    def embed_windows(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        out = np.zeros((len(windows), self.dimensions), dtype=np.float32)
        for row, window in enumerate(windows):
            for token in window:
                if ord("a") <= token <= ord("z"):
                    out[row, token - ord("a")] += 1
            out[row] /= max(len(window) + 2, 1)
        return out
