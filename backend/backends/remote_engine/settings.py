"""Where the engines are and which of their models to use, from arguments or the environment.

Environment variables (arguments to ``backend.connect`` win):

* ``CORE_ENGINE_URL``: the chat engine's OpenAI-compatible API (``http://host:port`` or
  ``.../v1``): vLLM, Ray Serve LLM, llama.cpp's llama-server, Ollama...
* ``CORE_ENGINE_CHAT_MODEL``: the engine's id of its chat model (default: its only model).
* ``CORE_ENGINE_EMBEDDINGS_URL``: the engine serving embeddings (vLLM runs pooling models in
  their own process, TEI is another server); default: ``CORE_ENGINE_URL``.
* ``CORE_ENGINE_EMBEDDING_MODEL``: that engine's id of its embedding model (default: its only
  model).
* ``CORE_ENGINE_EMBEDDING_TOKENIZER``: a Hugging Face id or local folder of that model's
  tokenizer, which cuts long inputs into windows (default: the embedded e5's for
  ``multilingual-e5-small``, else the engine's own ``/tokenize``; see
  ``backend.backends.remote_engine.tokenizers``).
* ``CORE_ENGINE_API_KEY``: bearer key sent to the engines.
* ``CORE_QUERY_PREFIX`` / ``CORE_PASSAGE_PREFIX``: as in-process (default e5's).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

from backend.backends.client.transport import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from backend.embeddings.windows import EmbeddingPrefixes

ENGINE_URL_ENV = "CORE_ENGINE_URL"
_ENV = {
    "engine_url": ENGINE_URL_ENV,
    "chat_model": "CORE_ENGINE_CHAT_MODEL",
    "embeddings_url": "CORE_ENGINE_EMBEDDINGS_URL",
    "embedding_model": "CORE_ENGINE_EMBEDDING_MODEL",
    "embedding_tokenizer": "CORE_ENGINE_EMBEDDING_TOKENIZER",
    "engine_api_key": "CORE_ENGINE_API_KEY",
}
#: The calibrations an engine's model may reuse: those of the embedded models' own weights.
REUSABLE_CALIBRATIONS = ("default", "small")


def engine_root_url(api_url: str) -> str:
    """``.../v1`` -> the engine's address, where vLLM, TEI and llama-server serve
    ``/tokenize``."""
    return api_url.removesuffix("/v1")


def engine_api_url(url: str) -> str:
    """``http://host:port`` or ``.../v1`` (slash or not) -> ``.../v1``."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"an engine URL must start with http:// or https://, got {url!r}")
    return url if url.endswith("/v1") else url + "/v1"


@dataclass(frozen=True)
class EngineSettings:
    """The engines behind an engine backend.

    Attributes:
        engine_url: the chat engine's API, ``.../v1``.
        chat_model / embedding_model: the engines' model ids; None: the engine's only model.
        embeddings_url: the embedding engine's API (default: ``engine_url``).
        embedding_tokenizer: the embedding model's tokenizer, a Hugging Face id or folder
            (default: see ``backend.backends.remote_engine.tokenizers``).
        engine_api_key: bearer key for both engines.
        grounded_at / not_grounded_below: groundedness thresholds for the engine's model.
        judge_calibration: ``"default"`` or ``"small"``: reuse the calibration made for those
            embedded weights (the engine serves the same model).
        timeout / max_retries: per request, as the HTTP backend's.
    """

    engine_url: str
    chat_model: str | None = None
    embeddings_url: str | None = None
    embedding_model: str | None = None
    embedding_tokenizer: str | None = None
    engine_api_key: str | None = field(default=None, repr=False)
    grounded_at: float | None = None
    not_grounded_below: float | None = None
    judge_calibration: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    prefixes: EmbeddingPrefixes = field(default_factory=EmbeddingPrefixes)

    def __post_init__(self) -> None:
        object.__setattr__(self, "engine_url", engine_api_url(self.engine_url))
        embeddings_url = engine_api_url(self.embeddings_url or self.engine_url)
        object.__setattr__(self, "embeddings_url", embeddings_url)
        if self.judge_calibration not in (None, *REUSABLE_CALIBRATIONS):
            raise ValueError(
                f"unknown judge_calibration {self.judge_calibration!r}; use one of: "
                f"{', '.join(REUSABLE_CALIBRATIONS)} (the calibrations of the embedded models), "
                "or pass grounded_at / not_grounded_below"
            )

    @classmethod
    def from_env(cls, **overrides: Any) -> EngineSettings:
        """Settings from the ``CORE_ENGINE_*`` variables, then ``overrides`` (None ignored)."""
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown engine options: {', '.join(sorted(unknown))}")
        given = {k: v for k, v in overrides.items() if v is not None}
        from_env = {name: os.environ.get(var) or None for name, var in _ENV.items()}
        values = {k: v for k, v in from_env.items() if v is not None} | given
        if not values.get("engine_url"):
            raise ValueError(f"an engine backend needs engine_url (or {ENGINE_URL_ENV})")
        prefixes = EmbeddingPrefixes(
            query=os.environ.get("CORE_QUERY_PREFIX", "query: "),
            passage=os.environ.get("CORE_PASSAGE_PREFIX", "passage: "),
        )
        return replace(cls(engine_url=values.pop("engine_url"), prefixes=prefixes), **values)
