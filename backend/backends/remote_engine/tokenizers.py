"""The tokenizer that cuts an engine's embedding inputs into windows: which one, decided once,
and the engines' own tokenize endpoints.

Long inputs are cut into windows of the embedding model's tokens (``backend.embeddings``), so
the backend needs that model's tokenizer. An engine's model name need not be a Hugging Face
id (vLLM's ``--served-model-name``, a TEI deployment's alias: "e5" could be any of the e5
models, whose English and multilingual members do not even share a vocabulary), so the name
is never looked up on the hub. In order:

1. ``embedding_tokenizer`` (``CORE_ENGINE_EMBEDDING_TOKENIZER``): a Hugging Face id or folder.
2. The embedded e5's own tokenizer, offline, for a model named ``multilingual-e5-small``
   (``intfloat/multilingual-e5-small`` on vLLM or TEI).
3. The engine's own ``/tokenize``, where it has one: vLLM (``/tokenize`` and
   ``/detokenize``), TEI (``/tokenize``, ``/decode``) or llama-server (``/tokenize``,
   ``/detokenize``), recognised by the shape of their answers to a probe.
4. Otherwise the embedding service refuses to start, naming the option to set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, RootModel, ValidationError

from backend.backends.client.transport import RetryingTransport
from backend.protocol.errors import APIStatusError, ServiceUnavailableError

#: The embedded model's name: its tokenizer ships with the local extra.
EMBEDDED_E5 = "multilingual-e5-small"
#: Where a window longer than this is asked for, the engine's own limit is kept lower.
MAX_WINDOW_TOKENS = 8192
#: llama-server's window for embeddings: its default physical batch (``--ubatch-size``), which
#: an embedding input must fit; its API does not report it.
LLAMA_SERVER_WINDOW = 512
#: Statuses of a tokenize endpoint that is not there, or speaks another dialect.
_NOT_THIS_DIALECT = (400, 404, 405, 415, 422)

NO_TOKENIZER = (
    "the embedding engine's model '{model}' has no tokenizer this backend can use to cut long "
    "inputs into windows: the engine at {url} answers no /tokenize (vLLM, TEI and llama-server "
    "do), and '{model}' is not a model whose tokenizer ships here. Name its tokenizer, a "
    "Hugging Face id or a local folder: embedding_tokenizer= (backend.connect, the adapters), "
    "CORE_ENGINE_EMBEDDING_TOKENIZER, or --engine-embedding-tokenizer"
)


class WindowTokenizer(Protocol):
    """Content tokens of texts and the texts of windows of them, in the model's vocabulary."""

    #: The encoder's window, special tokens included.
    max_window_tokens: int

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids, without special tokens and without truncation."""

    def decode(self, windows: Sequence[Sequence[int]]) -> list[str]:
        """Each window's text."""


class LocalTokenizer:
    """A Hugging Face tokenizer in this process."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.max_window_tokens = min(int(tokenizer.model_max_length), MAX_WINDOW_TOKENS)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        encoded = self.tokenizer(
            list(texts), add_special_tokens=False, truncation=False, verbose=False
        )
        return [list(ids) for ids in encoded["input_ids"]]

    def decode(self, windows: Sequence[Sequence[int]]) -> list[str]:
        return [self.tokenizer.decode(list(window)) for window in windows]


class _NotThisDialect(Exception):
    """A probe answered, but not as that dialect answers."""


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _VLLMTokens(_Lenient):
    tokens: list[int]
    max_model_len: int


class _VLLMText(_Lenient):
    prompt: str


class _TEIToken(_Lenient):
    id: int


class _TEITokens(RootModel[list[list[_TEIToken]]]):
    pass


class _TEIInfo(_Lenient):
    max_input_length: int


class _TEITexts(RootModel[list[str]]):
    pass


class _LlamaTokens(_Lenient):
    tokens: list[int]


class _LlamaText(_Lenient):
    content: str


class _EngineTokenizer:
    """An engine's tokenize endpoints, at the root of its address (not under ``/v1``)."""

    def __init__(self, transport: RetryingTransport, model: str, max_window_tokens: int) -> None:
        self._transport = transport
        self.model = model
        self.max_window_tokens = min(max_window_tokens, MAX_WINDOW_TOKENS)

    def _post(self, path: str, body: Any, shape: type[BaseModel]) -> Any:
        return shape.model_validate_json(self._transport.send("POST", path, body).content)


class VLLMTokenizer(_EngineTokenizer):
    """vLLM's ``/tokenize`` (its answer names the model's window) and ``/detokenize``."""

    @classmethod
    def probe(cls, transport: RetryingTransport, model: str) -> VLLMTokenizer:
        body = {"model": model, "prompt": "hello", "add_special_tokens": False}
        answer = _VLLMTokens.model_validate_json(transport.send("POST", "/tokenize", body).content)
        if not answer.tokens:
            raise _NotThisDialect
        return cls(transport, model, answer.max_model_len)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        bodies = [{"model": self.model, "prompt": t, "add_special_tokens": False} for t in texts]
        return [self._post("/tokenize", body, _VLLMTokens).tokens for body in bodies]

    def decode(self, windows: Sequence[Sequence[int]]) -> list[str]:
        bodies = [{"model": self.model, "tokens": list(window)} for window in windows]
        return [self._post("/detokenize", body, _VLLMText).prompt for body in bodies]


class TEITokenizer(_EngineTokenizer):
    """text-embeddings-inference's ``/tokenize`` and ``/decode`` (both batched), its window
    from ``/info``."""

    @classmethod
    def probe(cls, transport: RetryingTransport, model: str) -> TEITokenizer:
        body = {"inputs": ["hello"], "add_special_tokens": False}
        answer = _TEITokens.model_validate_json(transport.send("POST", "/tokenize", body).content)
        if not answer.root or not answer.root[0]:
            raise _NotThisDialect
        info = _TEIInfo.model_validate_json(transport.send("GET", "/info").content)
        return cls(transport, model, info.max_input_length)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        body = {"inputs": list(texts), "add_special_tokens": False}
        return [[t.id for t in ids] for ids in self._post("/tokenize", body, _TEITokens).root]

    def decode(self, windows: Sequence[Sequence[int]]) -> list[str]:
        if not windows:
            return []
        body = {"ids": [list(window) for window in windows], "skip_special_tokens": False}
        return self._post("/decode", body, _TEITexts).root


class LlamaServerTokenizer(_EngineTokenizer):
    """llama.cpp's llama-server: ``/tokenize`` and ``/detokenize``, one text a request."""

    @classmethod
    def probe(cls, transport: RetryingTransport, model: str) -> LlamaServerTokenizer:
        body = {"content": "hello", "add_special": False}
        answer = _LlamaTokens.model_validate_json(transport.send("POST", "/tokenize", body).content)
        if not answer.tokens:  # its answer to a body without "content"
            raise _NotThisDialect
        return cls(transport, model, LLAMA_SERVER_WINDOW)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        bodies = [{"content": text, "add_special": False} for text in texts]
        return [self._post("/tokenize", body, _LlamaTokens).tokens for body in bodies]

    def decode(self, windows: Sequence[Sequence[int]]) -> list[str]:
        bodies = [{"tokens": list(window)} for window in windows]
        return [self._post("/detokenize", body, _LlamaText).content for body in bodies]


#: Tried in this order: each dialect's probe body is refused by the others, or answered in a
#: shape that is not its own (llama-server answers no tokens to a body without ``content``).
ENGINE_TOKENIZERS: tuple[Callable[[RetryingTransport, str], WindowTokenizer], ...] = (
    VLLMTokenizer.probe,
    TEITokenizer.probe,
    LlamaServerTokenizer.probe,
)


def engine_tokenizer(transport: RetryingTransport, model: str) -> WindowTokenizer | None:
    """The engine's own tokenize endpoints for ``model``, or None where it has none.

    Raises:
        APIConnectionError / AuthenticationError...: the engine cannot be asked at all.
    """
    for probe in ENGINE_TOKENIZERS:
        try:
            return probe(transport, model)
        except (_NotThisDialect, ValidationError):
            continue
        except APIStatusError as exc:
            if exc.status_code not in _NOT_THIS_DIALECT:
                raise
    return None


def hugging_face_tokenizer(name: str) -> WindowTokenizer:
    """A Hugging Face tokenizer by id or folder (the embedded e5's, offline, by its name)."""
    from transformers import AutoTokenizer

    if is_embedded_e5(name):
        from backend.engines.weights.embedded_e5 import resolve_embedding_model

        name = resolve_embedding_model(EMBEDDED_E5)
    return LocalTokenizer(AutoTokenizer.from_pretrained(name))


def is_embedded_e5(model: str) -> bool:
    """Whether ``model`` names the embedded e5 (with or without its organisation)."""
    return model.rstrip("/").rsplit("/", 1)[-1] == EMBEDDED_E5


def resolve_window_tokenizer(
    option: str | None, model: str, transport: RetryingTransport
) -> WindowTokenizer:
    """The tokenizer of the engine's embedding ``model``, in the module's order.

    Args:
        option: ``embedding_tokenizer``, a Hugging Face id or folder; None: not given.
        model: the engine's name for its embedding model.
        transport: the embedding engine, at the root of its address.

    Raises:
        ServiceUnavailableError: no tokenizer could be found (the message names the option).
    """
    if option is not None:
        return hugging_face_tokenizer(option)
    if is_embedded_e5(model):
        return hugging_face_tokenizer(EMBEDDED_E5)
    found = engine_tokenizer(transport, model)
    if found is None:
        raise ServiceUnavailableError(NO_TOKENIZER.format(model=model, url=transport.base_url))
    return found
