"""core-textmodels: chat completions (tools, streaming), groundedness checks and
query/passage embeddings, in-process on local models or over HTTP.

>>> import backend
>>> service = backend.connect()                       # in-process, embedded models
>>> reply = service.chat({"model": "core-1-mini-chat",
...                       "messages": [{"role": "user", "content": "Hello!"}]})
>>> remote = backend.connect(base_url="http://127.0.0.1:8000", api_key="...")  # HTTP
>>> engine = backend.connect(engine_url="http://127.0.0.1:8080/v1",              # vLLM, ...
...                          chat_model="Qwen/Qwen2.5-7B-Instruct", grounded_at=0.6)

The rooms: ``protocol`` (the API as data), ``engines`` (models), ``chat``, ``groundedness`` and
``embeddings`` (the service's capabilities above the engines), ``interface`` (``Backend``),
``backends`` (its implementations: ``local`` in-process, ``client`` over HTTP,
``remote_engine`` in front of OpenAI-compatible engines), ``server``, ``bulk`` and
``testing`` (shipped test doubles); docs/architecture.md walks through them.

Environment variables (arguments to ``connect`` and the adapters win):

* ``CORE_BASE_URL``: a core-textmodels server to send every request to, e.g.
  ``http://127.0.0.1:8000`` (default: none: the engines of ``CORE_ENGINE_URL``, else the
  models in this process).
* ``CORE_API_KEY``: the bearer key sent to that server (default: none).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field, SecretStr, field_validator

from backend.backends.client.http import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from backend.engines.selection import CHAT_ENGINES
from backend.interface import AsyncChatStream, Backend, ChatStream
from backend.protocol.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    CoreError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
    RequestTooLargeError,
    ServiceUnavailableError,
)

__all__ = [
    "ConnectionSettings",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncChatStream",
    "AuthenticationError",
    "Backend",
    "BadRequestError",
    "ChatStream",
    "CoreError",
    "InternalServerError",
    "NotFoundError",
    "RateLimitError",
    "RequestTooLargeError",
    "ServiceUnavailableError",
    "connect",
    "connect_shared",
]


BASE_URL_ENV = "CORE_BASE_URL"
API_KEY_ENV = "CORE_API_KEY"
ENGINE_URL_ENV = "CORE_ENGINE_URL"


def connect(
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    engine_url: str | None = None,
    **options: Any,
) -> Backend:
    """Return a ``Backend``: a core-textmodels server over HTTP, OpenAI-compatible engines, or
    the models in this process.

    The first of these decides: ``base_url``, ``engine_url``, ``CORE_BASE_URL``,
    ``CORE_ENGINE_URL``; with none, the in-process models.

    Args:
        base_url: the server's address, e.g. ``http://127.0.0.1:8000``.
        api_key: the bearer key for the server (default ``CORE_API_KEY``).
        engine_url: an OpenAI-compatible engine's API (vLLM, llama-server, Ollama...), e.g.
            ``http://127.0.0.1:8080/v1``; see ``backend.backends.remote_engine.EngineSettings`` for
            its options (``chat_model``, ``embeddings_url``, ``embedding_model``,
            ``embedding_tokenizer``, ``engine_api_key``, ``grounded_at`` / ``not_grounded_below``,
            ``judge_calibration``, ``timeout``, ``max_retries``).
        **options: for HTTP, client options (``timeout``, ``max_retries``...); in-process,
            ``EngineConfig`` fields (``profile="small"``, ``chat_model=...``, ``device=...``,
            ``chat_engine="transformers"``: which engine runs the chat model, ``auto``,
            ``llama.cpp`` or ``transformers``), refused at once when unknown or out of range.
    """
    if not base_url and not engine_url:
        base_url = _env_base_url()
        engine_url = None if base_url else os.environ.get(ENGINE_URL_ENV) or None
    if base_url:
        from backend.backends.client import HTTPBackend

        return HTTPBackend(
            base_url=base_url, api_key=api_key or os.environ.get(API_KEY_ENV), **options
        )
    if engine_url:
        from backend.backends.remote_engine import EngineBackend

        return EngineBackend(engine_url=engine_url, **options)
    from backend.backends.local import InProcessBackend

    return InProcessBackend(**options)


def connect_shared(
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_MAX_RETRIES,
    engine_url: str | None = None,
    chat_engine: str | None = None,
    judge_model: str | None = None,
    **engine_options: Any,
) -> Backend:
    """The backend an adapter uses: the server at ``base_url`` (``CORE_BASE_URL``), or the
    engines at ``engine_url`` (``CORE_ENGINE_URL``; ``engine_options`` as for ``connect``),
    else a handle on the in-process backend this process shares among everything built with
    the same engine settings (from the ``CORE_*`` variables, and in-process only
    ``chat_engine``: ``auto``, ``llama.cpp`` or ``transformers``, and ``judge_model``), so
    models load once.

    ``timeout`` and ``max_retries`` concern the HTTP clients only: in-process there is no
    connection to time out or retry. Closing the result closes the client, or gives up the
    handle (closing the last one frees the shared models).
    """
    if base_url or engine_url or _env_base_url() or os.environ.get(ENGINE_URL_ENV):
        options = engine_options if engine_url or not _env_base_url() else {}
        return connect(
            base_url,
            api_key,
            engine_url=engine_url,
            timeout=timeout,
            max_retries=max_retries,
            **options,
        )
    from backend.backends.local.config import EngineConfig
    from backend.backends.local.shared import shared_backend

    thresholds = {k: engine_options.get(k) for k in ("grounded_at", "not_grounded_below")}
    config = EngineConfig.from_env(chat_engine=chat_engine, judge_model=judge_model, **thresholds)
    return shared_backend(config)


def _env_base_url() -> str | None:
    return os.environ.get(BASE_URL_ENV) or None


def _env_api_key() -> SecretStr | None:
    value = os.environ.get(API_KEY_ENV)
    return SecretStr(value) if value else None


class ConnectionSettings(BaseModel):
    """A server to send requests to over HTTP, OpenAI-compatible engines, or neither: the
    models run in this process.

    Args:
        base_url: the server's address (default ``CORE_BASE_URL``); None runs the models in
            this process, shared with everything else built with the same engine settings.
        api_key: bearer key (default ``CORE_API_KEY``); never serialised.
        timeout / max_retries: for the HTTP clients, which alone retry (not in-process).
        engine_url, chat_model, embeddings_url, embedding_model, embedding_tokenizer,
            engine_api_key, grounded_at, not_grounded_below, judge_calibration: the engines
            and their models, as for ``backend.connect(engine_url=...)``
            (``backend.backends.remote_engine.EngineSettings``); an explicit ``base_url``
            wins over them.
        chat_engine: in-process only, which engine runs the chat model: ``auto``,
            ``llama.cpp`` or ``transformers`` (default ``CORE_CHAT_ENGINE``, else ``auto``);
            another value is refused here. A ready backend goes to the adapters' ``backend=``.
        judge_model: in-process only, a model that reads the groundedness judge's prompts
            instead of the chat model (default ``CORE_JUDGE_MODEL``; ``EngineConfig``).
    """

    base_url: str | None = Field(
        default_factory=_env_base_url,
        description="Server address, e.g. http://127.0.0.1:8000 (default: CORE_BASE_URL); "
        "unset means the in-process models.",
    )
    api_key: SecretStr | None = Field(
        default_factory=_env_api_key,
        exclude=True,
        description="Bearer key for the server (default: CORE_API_KEY).",
    )
    timeout: float = Field(
        default=DEFAULT_TIMEOUT, gt=0.0, description="Seconds per HTTP read or write (HTTP only)."
    )
    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES,
        ge=0,
        description="Retries of the HTTP client after the first attempt (HTTP only).",
    )

    engine_url: str | None = Field(
        default=None,
        description="An OpenAI-compatible engine's API, e.g. http://127.0.0.1:8080/v1 "
        "(default: CORE_ENGINE_URL).",
    )
    chat_model: str | None = Field(
        default=None, description="The engine's chat model id (default: its only model)."
    )
    embeddings_url: str | None = Field(
        default=None, description="The engine serving embeddings (default: engine_url)."
    )
    embedding_model: str | None = Field(
        default=None, description="The embedding engine's model id (default: its only model)."
    )
    embedding_tokenizer: str | None = Field(
        default=None,
        description="The embedding model's tokenizer, a Hugging Face id or folder (default: "
        "CORE_ENGINE_EMBEDDING_TOKENIZER, else the engine's own /tokenize).",
    )
    engine_api_key: SecretStr | None = Field(
        default=None, exclude=True, description="Bearer key for the engines."
    )
    grounded_at: float | None = Field(
        default=None, description="Groundedness threshold for the engine's model."
    )
    not_grounded_below: float | None = Field(
        default=None, description="Support below which the engine's model says notGrounded."
    )
    judge_calibration: str | None = Field(
        default=None,
        description="'small' or 'default': reuse the calibration of those embedded weights.",
    )

    chat_engine: str | None = Field(
        default=None,
        description="In-process: the engine running the chat model, one of "
        + ", ".join(CHAT_ENGINES)
        + " (default: CORE_CHAT_ENGINE, else auto).",
    )

    judge_model: str | None = Field(
        default=None,
        description="In-process: a model reading the groundedness judge's prompts instead of "
        "the chat model (default: CORE_JUDGE_MODEL, else the chat model).",
    )

    @field_validator("chat_engine", mode="before")
    @classmethod
    def _known_chat_engine(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, str) or value not in CHAT_ENGINES):
            raise ValueError(
                f"unknown chat engine {value!r}; use one of: {', '.join(CHAT_ENGINES)} "
                "(a ready backend goes to backend=)"
            )
        return value

    def connect(self) -> Backend:
        """The HTTP client for ``base_url``, the engine backend for ``engine_url``, or a
        handle on the shared in-process backend (``backend.connect_shared``)."""
        engine_url = self.engine_url if "base_url" not in self.model_fields_set else None
        engine_options = {
            name: getattr(self, name)
            for name in ("chat_model", "embeddings_url", "embedding_model", "embedding_tokenizer")
            + ("grounded_at", "not_grounded_below", "judge_calibration")
            if getattr(self, name) is not None
        }
        if self.engine_api_key is not None:
            engine_options["engine_api_key"] = self.engine_api_key.get_secret_value()
        return connect_shared(
            self.base_url if engine_url is None else None,
            self.api_key.get_secret_value() if self.api_key else None,
            timeout=self.timeout,
            max_retries=self.max_retries,
            engine_url=engine_url,
            chat_engine=self.chat_engine,
            judge_model=self.judge_model,
            **engine_options,
        )
