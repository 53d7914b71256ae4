"""What every wire object shares: the request and response bases, and the error object
(spec 2.8) any endpoint may answer with.

Request models ignore unknown fields, because OpenAI-style clients send extras (``user``,
``presence_penalty``, ...); the useful extras are supported and documented on their fields.
Response models serialise exactly the spec's objects.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestModel(BaseModel):
    """A request body or a part of one: unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")


class ResponseModel(BaseModel):
    """A response object or a part of one (read leniently by clients: unknown fields are
    ignored there too)."""

    model_config = ConfigDict(extra="ignore")


class ErrorBody(ResponseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(ResponseModel):
    error: ErrorBody
