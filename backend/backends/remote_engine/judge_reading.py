"""The groundedness judge's readings from an engine: P(yes) from its next-token logprobs.

The judge runs here, on the client, with the same questions and claims as in-process; each
reading is one chat completion of one token at temperature 0 asking for ``top_logprobs``, and
P(yes) is the probability mass of the "yes" spellings among them over that of yes and no
(``backend.chat.yes_no``). An engine serving the embedded GGUF renders the same chat template,
so it gives the in-process readings.

Context chunks are sized with the embedded Qwen2.5 tokenizer (the profile whose calibration is
reused, else the small one's: the same vocabulary as the Qwen2.5 family engines serve), or at
four characters a token where the local extra is not installed. Counts only size chunks; the
prompt tokens reported are the engine's.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from backend.backends.remote_engine.api import EngineAPI
from backend.chat.yes_no import NO_SPELLINGS, YES_SPELLINGS, yes_no_share
from backend.protocol.errors import InternalServerError

logger = logging.getLogger(__name__)

#: The most alternatives OpenAI's API (and vLLM, llama.cpp) return per token.
TOP_LOGPROBS = 20
_CHARS_PER_TOKEN = 4


def embedded_chat_tokenizer(profile: str) -> Any | None:
    """The tokenizer of a profile's embedded chat model; None without the local extra."""
    try:
        from transformers import AutoTokenizer

        from backend.backends.local.config import PROFILE_CHAT_MODELS
        from backend.engines.weights.embedded_chat import EMBEDDED_CHAT_MODELS, convert_tokenizer
    except ImportError:
        return None
    folder = convert_tokenizer(EMBEDDED_CHAT_MODELS[PROFILE_CHAT_MODELS[profile]])
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def _first_tokens(tokenizer: Any | None, spellings: tuple[str, ...]) -> frozenset[str]:
    """The first token of each spelling as text: what ``top_logprobs`` names."""
    if tokenizer is None:
        return frozenset(spellings)
    firsts = (tokenizer.encode(s, add_special_tokens=False)[0] for s in spellings)
    return frozenset(tokenizer.decode([t]) for t in firsts)


class EngineYesNoReading:
    """P(yes) read from an engine's ``top_logprobs`` (a ``backend.chat.yes_no.YesNoReading``).

    Args:
        api: the chat engine.
        model: its model id.
        tokenizer: sizes context chunks and names the yes/no tokens; None counts characters.
    """

    def __init__(self, api: EngineAPI, model: str, tokenizer: Any | None) -> None:
        self.api = api
        self.model = model
        self._tokenizer = tokenizer
        self._yes = _first_tokens(tokenizer, YES_SPELLINGS)
        self._no = _first_tokens(tokenizer, NO_SPELLINGS) - self._yes

    def count_tokens(self, text: str) -> int:
        if self._tokenizer is None:
            return math.ceil(len(text) / _CHARS_PER_TOKEN)
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def read_many(self, conversations: list[list[dict[str, str]]]) -> list[tuple[float, int]]:
        """One request per conversation, one after the other (as the judge asked them before
        it asked them together)."""
        return [self.read(conversation) for conversation in conversations]

    def read(self, conversation: list[dict[str, str]]) -> tuple[float, int]:
        answer = self.api.chat(
            {
                "model": self.model,
                "messages": conversation,
                "max_tokens": 1,
                "temperature": 0.0,
                "logprobs": True,
                "top_logprobs": TOP_LOGPROBS,
            }
        )
        choice = answer.choices[0] if answer.choices else None
        logprobs = choice.logprobs if choice is not None else None
        if logprobs is None or not logprobs.content:
            raise InternalServerError(
                f"the engine at {self.api.url} returned no logprobs; the groundedness check "
                "reads P(yes) from top_logprobs, so it needs an engine that returns them for "
                "chat completions (vLLM, llama-server, llama-cpp-python's server)"
            )
        top = logprobs.content[0].top_logprobs
        yes = sum(math.exp(t.logprob) for t in top if t.token in self._yes)
        no = sum(math.exp(t.logprob) for t in top if t.token in self._no)
        return yes_no_share(yes, no), answer.usage.prompt_tokens if answer.usage else 0
