"""Embedding requests on a local encoder: checked against the limits, tokenized once, and
combined with the requests that arrive while the encoder is busy."""

from __future__ import annotations

import base64
import warnings

import numpy as np

from backend.embeddings.combining import CombiningRunner
from backend.embeddings.windows import EmbeddingPrefixes, WindowedEncoder
from backend.engines.base import EmbeddingEngine
from backend.protocol.catalogue import InputType, ModelCard, serving_card
from backend.protocol.errors import BadRequestError
from backend.protocol.schemas import Embedding, EmbeddingList, EmbeddingRequest, EmbeddingUsage
from backend.protocol.validation import check_embedding_inputs, check_embedding_tokens

#: Texts from several waiting requests embedded in one run at most (bounds one run's latency).
MAX_COMBINED_TEXTS = 256


class EmbeddingService:
    """Answers embedding requests with ``engine``; safe to call from several threads."""

    def __init__(self, engine: EmbeddingEngine, prefixes: EmbeddingPrefixes | None = None):
        self.encoder = WindowedEncoder(engine, prefixes)
        self._combining = CombiningRunner(
            self.encoder.embed_many, max_batch_size=MAX_COMBINED_TEXTS
        )

    def embed(self, request: EmbeddingRequest, card: ModelCard) -> EmbeddingList:
        """The vectors of ``request`` for the embedding model ``card``.

        Raises:
            BadRequestError: the inputs break a limit of spec 4.3 / 8, or ``dimensions`` is
                not the model's own.
        """
        serving = serving_card(card)
        if card.deprecated:
            warnings.warn(
                f"model '{card.name}' is deprecated since {card.deprecation_date}; it is served "
                f"by '{serving.name}', switch to that name",
                DeprecationWarning,
                stacklevel=3,
            )
        texts = check_embedding_inputs(request)
        dimensions = self.encoder.engine.dimensions
        if request.dimensions is not None and request.dimensions != dimensions:
            raise BadRequestError(
                f"invalid request: dimensions {request.dimensions} is not available; this "
                f"model produces {dimensions}-dimensional vectors",
                param="dimensions",
            )
        tokenized = self.encoder.tokenize(texts, serving.input_type or InputType.PASSAGE)
        counts = tokenized.token_counts
        check_embedding_tokens(counts, single=isinstance(request.input, str))
        vectors = self._combining.submit(tokenized, size=len(texts))
        return EmbeddingList(
            data=[
                Embedding(index=i, embedding=_encode(vector, request.encoding_format))
                for i, vector in enumerate(vectors)
            ],
            model=serving.version,
            usage=EmbeddingUsage(prompt_tokens=sum(counts), total_tokens=sum(counts)),
        )


def _encode(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":  # OpenAI's convention: little-endian float32 bytes
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.astype(np.float32).tolist()
