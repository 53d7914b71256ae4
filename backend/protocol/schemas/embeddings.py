"""``POST /v1/core/embeddings`` (spec 2.7, 4.3): the request and the list of vectors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from backend.protocol.schemas.base import RequestModel, ResponseModel


class EmbeddingRequest(RequestModel):
    """Body of ``POST /v1/core/embeddings``."""

    model: str
    input: str | list[str] = Field(description="One string or up to 100 strings, none empty.")
    encoding_format: Literal["float", "base64"] = Field(
        default="float",
        description="float (a JSON array) or base64 (little-endian float32 bytes, as OpenAI).",
    )
    dimensions: int | None = Field(
        default=None, description="Accepted only when equal to the model's own dimensionality."
    )

    @field_validator("encoding_format", mode="before")
    @classmethod
    def _default_format(cls, value: Any) -> Any:
        return "float" if value is None else value

    @property
    def inputs(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


class Embedding(ResponseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(description="Floats, or base64 float32 bytes.")


class EmbeddingUsage(ResponseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage

    def float_vectors(self, expected: int | None = None) -> list[list[float]]:
        """The vectors in input order (by ``index``), as lists of floats.

        Raises:
            ValueError: the vectors came base64-encoded, or there are not ``expected`` of them.
        """
        ordered = sorted(self.data, key=lambda item: item.index)
        if expected is not None and len(ordered) != expected:
            raise ValueError(f"the service returned {len(ordered)} vectors for {expected} inputs")
        vectors = []
        for item in ordered:
            if isinstance(item.embedding, str):
                raise ValueError("the service returned base64 embeddings; float vectors were asked")
            vectors.append(item.embedding)
        return vectors
