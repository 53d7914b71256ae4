"""Small offline test doubles: a character-level tokenizer and a scripted chat engine.

They let the shared layers (validation, streaming, tool parsing) be tested in milliseconds;
behaviour tests on real models live in the ``model``-marked tests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from backend.engines.base import ChatEngine, EmbeddingEngine, SamplingParams
from backend.interface import Backend

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
    """Answers every prompt with ``reply`` (then EOS), one character per token."""

    def __init__(self, reply: str = "Hello there.", context_length: int = 4096) -> None:
        self.tokenizer = CharTokenizer()
        self.context_length = context_length
        self.eos_token_ids = frozenset({EOS})
        self.device = "cpu"
        self.reply = reply
        self.generated = 0
        self.prompts: list[list[int]] = []

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[int]:
        self.prompts.append(list(prompt_ids))
        for i, token in enumerate([ord(c) for c in self.reply] + [EOS]):
            if i >= params.max_new_tokens or should_stop():
                return
            self.generated += 1
            yield token

    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        # Says "yes" when the reply starts with "y", "no" otherwise, so tests script verdicts.
        first = ord("y") if self.reply.startswith("y") else ord("n")
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


class EchoChatEngine(ScriptedChatEngine):
    """Answers from the request itself, so concurrent tests can check each answer is its own.

    Replies ``echo: <last user message>``; judges a groundedness claim supported exactly when
    the claim appears verbatim in its document. A user message containing ``OUT_OF_MEMORY``
    makes generation raise ``MemoryError``, standing for a model that ran out of memory.
    """

    OUT_OF_MEMORY = "OUT_OF_MEMORY"

    def __init__(self, token_delay: float = 0.0, context_length: int = 4096) -> None:
        super().__init__("", context_length)
        self.token_delay = token_delay

    @staticmethod
    def reply_to(user_content: str) -> str:
        return f"echo: {user_content}"

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[int]:
        prompt = self.tokenizer.decode(prompt_ids)
        last_user = prompt.rpartition("user: ")[2].removesuffix("\nassistant: ")
        if self.OUT_OF_MEMORY in last_user:
            raise MemoryError("out of memory while generating (fake)")
        for i, token in enumerate([ord(c) for c in self.reply_to(last_user)] + [EOS]):
            if i >= params.max_new_tokens or should_stop():
                return
            if self.token_delay:
                time.sleep(self.token_delay)
            yield token

    def next_token_logprobs(
        self, prompt_ids: Sequence[int], candidate_ids: Sequence[int]
    ) -> list[float]:
        # the question asked last (worked examples may come before it)
        prompt = self.tokenizer.decode(prompt_ids)
        document, _, rest = prompt.rpartition("Document:\n")[2].partition("\n\nClaim: ")
        claim, _, question = rest.partition("\n\n")
        supported = bool(claim) and claim in document
        # "yes" to the contrast question ("does the document contradict the claim?") is a no
        says_yes = supported if question.startswith("Is the claim supported") else not supported
        first = ord("y") if says_yes else ord("n")
        return [0.0 if c == first else math.log(1e-3) for c in candidate_ids]


class StubBackend(Backend):
    """A backend that answers nothing: subclasses override the methods a test uses."""

    def chat(self, request):
        raise NotImplementedError

    def stream_chat(self, request):
        raise NotImplementedError

    def embed(self, request):
        raise NotImplementedError

    async def achat(self, request):
        raise NotImplementedError

    async def astream_chat(self, request):
        raise NotImplementedError

    async def aembed(self, request):
        raise NotImplementedError
