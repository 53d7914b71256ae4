"""Talking to one OpenAI-compatible engine: chat completions (whole or streamed), embeddings
and the model list, sent with the HTTP backend's retries and read with pydantic.

An engine's error statuses become the same typed errors as the service's own
(``backend.protocol.errors``), its message kept: a prompt too long for the engine's context is
a 400 from the engine, as it is in-process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from backend.backends.client.retries import transport_error
from backend.backends.client.transport import RetryingTransport
from backend.backends.remote_engine.wire import EngineCompletion, EngineEmbeddings, EngineModels
from backend.protocol.errors import APIConnectionError, InternalServerError, NotFoundError
from backend.protocol.sse import DONE, iter_events

ModelT = TypeVar("ModelT", bound=BaseModel)


def _parse(url: str, content: bytes | str, model: type[ModelT]) -> ModelT:
    try:
        return model.model_validate_json(content)
    except ValidationError as exc:
        raise InternalServerError(
            f"the engine at {url} answered with a body that is not an OpenAI-style "
            f"{model.__name__.removeprefix('Engine').lower()}"
        ) from exc


class EngineAPI:
    """One engine's ``/v1`` API.

    Args:
        url: ``.../v1``.
        api_key / timeout / max_retries: as for ``backend.backends.client.HTTPBackend``.
    """

    def __init__(self, url: str, api_key: str | None, timeout: float, max_retries: int) -> None:
        self.url = url
        self._transport = RetryingTransport(url, api_key, timeout, max_retries=max_retries)
        self._model_ids: list[str] | None = None

    def close(self) -> None:
        self._transport.close()

    def model_ids(self) -> list[str]:
        """The ids of the models the engine serves (asked once)."""
        if self._model_ids is None:
            response = self._transport.send("GET", "/models")
            self._model_ids = [m.id for m in _parse(self.url, response.content, EngineModels).data]
        return self._model_ids

    def only_model(self, what: str) -> str:
        """The engine's one model, for a backend not told which to use."""
        ids = self.model_ids()
        if len(ids) != 1:
            served = ", ".join(ids) or "none"
            raise NotFoundError(
                f"the engine at {self.url} serves {len(ids)} models ({served}); name its "
                f"{what} (e.g. chat_model= / embedding_model=, or CORE_ENGINE_CHAT_MODEL)"
            )
        return ids[0]

    def chat(self, body: dict[str, Any]) -> EngineCompletion:
        response = self._transport.send("POST", "/chat/completions", {**body, "stream": False})
        return _parse(self.url, response.content, EngineCompletion)

    def stream_chat(self, body: dict[str, Any]) -> Iterator[EngineCompletion]:
        """The chunks of a streamed completion; the response closes when the iterator does
        (a client that went away stops the engine's generation too)."""
        response = self._transport.send(
            "POST", "/chat/completions", {**body, "stream": True}, stream=True
        )
        try:
            for event in iter_events(response.iter_bytes()):
                if event.data == DONE:
                    return
                data = json.loads(event.data)
                if isinstance(data, dict) and "error" in data:
                    message = json.dumps(data["error"], ensure_ascii=False)
                    raise InternalServerError(f"the engine failed mid-stream: {message}")
                yield _parse(self.url, event.data, EngineCompletion)
        except httpx.TransportError as exc:
            raise transport_error(exc) from exc
        except json.JSONDecodeError as exc:
            raise InternalServerError("the engine sent a stream event that is not JSON") from exc
        finally:
            response.close()
        raise APIConnectionError(f"the engine at {self.url} ended the stream without [DONE]")

    def embed(self, model: str, texts: list[str]) -> EngineEmbeddings:
        body = {"model": model, "input": texts, "encoding_format": "float"}
        response = self._transport.send("POST", "/embeddings", body)
        return _parse(self.url, response.content, EngineEmbeddings)
