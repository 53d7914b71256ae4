"""``GET /v1/core/models`` (spec 2.1): the catalogue as OpenAI's model list."""

from __future__ import annotations

from typing import Literal

from backend.protocol.schemas.base import ResponseModel


class ModelObject(ResponseModel):
    """One entry of ``GET /v1/core/models`` (OpenAI list shape plus the catalogue's fields)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "core"
    operation: Literal["chat", "groundedness", "embeddings"]
    status: Literal["beta", "deprecated"]
    release_date: str
    context_length: int
    version: str
    deprecation_date: str | None = None
    replaced_by: str | None = None


class ModelList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[ModelObject]
