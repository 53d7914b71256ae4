"""``CoreEmbeddings``: the query/passage embedding models as LangChain ``Embeddings``.

Like langchain-upstage, ``embed_query`` uses the ``-query`` model and ``embed_documents``
the ``-passage`` model; both share one vector space. Any number of documents is split into
requests within the service's limits (spec 8), in order.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Sequence

from langchain_core.embeddings import Embeddings
from pydantic import Field

from backend.schemas import EmbeddingList
from backend.validation import MAX_EMBEDDING_INPUTS, MAX_TOKENS_PER_EMBEDDING_REQUEST
from langchain_core_ext.connection import CoreConnection

DEFAULT_EMBEDDING_MODEL = "core-embedding-1-large"

# Tokens an input may take beyond its characters: the model's ``query: `` / ``passage: ``
# prefix and the begin and end tokens.
_TOKEN_ALLOWANCE = 16


def token_upper_bound(text: str) -> int:
    """An upper bound of the tokens the service counts for ``text``, with no tokenizer.

    The embedding tokenizer (SentencePiece) makes at most one token per character of the
    NFKC-normalised text, plus a word-start marker; the allowance covers the prefix and the
    special tokens.
    """
    return len(unicodedata.normalize("NFKC", text)) + _TOKEN_ALLOWANCE


def batch_bounds(
    texts: Sequence[str],
    *,
    max_items: int = MAX_EMBEDDING_INPUTS,
    max_tokens: int = MAX_TOKENS_PER_EMBEDDING_REQUEST,
    count: Callable[[str], int] = token_upper_bound,
) -> list[tuple[int, int]]:
    """Split ``texts`` into consecutive ``(start, end)`` ranges, each one request: at most
    ``max_items`` strings and fewer than ``max_tokens`` tokens by ``count``. A single text
    over the budget gets a request of its own (the service then says what is wrong)."""
    bounds: list[tuple[int, int]] = []
    start, tokens = 0, 0
    for i, text in enumerate(texts):
        size = count(text)
        if i > start and (i - start >= max_items or tokens + size >= max_tokens):
            bounds.append((start, i))
            start, tokens = i, 0
        tokens += size
    if start < len(texts):
        bounds.append((start, len(texts)))
    return bounds


def _vectors(response: EmbeddingList) -> list[list[float]]:
    ordered = sorted(response.data, key=lambda item: item.index)
    out: list[list[float]] = []
    for item in ordered:
        if isinstance(item.embedding, str):
            raise TypeError("expected float vectors, got base64; do not set encoding_format")
        out.append([float(x) for x in item.embedding])
    return out


class CoreEmbeddings(CoreConnection, Embeddings):
    """Query and passage embeddings from the core service.

    Example:
        >>> from langchain_core_ext import CoreEmbeddings
        >>> embeddings = CoreEmbeddings()          # in-process, or CORE_BASE_URL
        >>> vector = embeddings.embed_query("What is the capital of France?")

    Args (besides the connection settings of ``CoreConnection``):
        model: the model family; ``-query`` and ``-passage`` are appended.
        show_progress: a tqdm progress bar over the requests of ``embed_documents``.
    """

    model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        description="Model family: embed_query uses MODEL-query, embed_documents MODEL-passage.",
    )
    show_progress: bool = Field(default=False, description="Show a tqdm bar for long lists.")

    @property
    def query_model(self) -> str:
        return f"{self.model}-query"

    @property
    def passage_model(self) -> str:
        return f"{self.model}-passage"

    def _progress(self, batches: list[tuple[int, int]], total: int) -> Iterable[tuple[int, int]]:
        if not self.show_progress:
            return batches
        from tqdm.auto import tqdm

        return tqdm(batches, total=len(batches), desc=f"Embedding {total} texts", unit="request")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Passage vectors, one per text in order, in as many requests as the limits need."""
        service = self._get_backend()
        vectors: list[list[float]] = []
        for start, end in self._progress(batch_bounds(texts), len(texts)):
            response = service.embed({"model": self.passage_model, "input": texts[start:end]})
            vectors.extend(_vectors(response))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The query vector of ``text``."""
        response = self._get_backend().embed({"model": self.query_model, "input": text})
        return _vectors(response)[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        service = self._get_backend()
        vectors: list[list[float]] = []
        for start, end in self._progress(batch_bounds(texts), len(texts)):
            response = await service.aembed(
                {"model": self.passage_model, "input": texts[start:end]}
            )
            vectors.extend(_vectors(response))
        return vectors

    async def aembed_query(self, text: str) -> list[float]:
        response = await self._get_backend().aembed({"model": self.query_model, "input": text})
        return _vectors(response)[0]
