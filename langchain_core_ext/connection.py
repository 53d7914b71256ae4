"""How the LangChain adapters reach the service: an injected ``Backend``, the HTTP client, or
one in-process backend shared by every adapter in the process.

The settings are the same on ``ChatCore``, ``CoreEmbeddings`` and ``CoreGroundednessCheck``,
so they live on one mixin. The backend is built on first use, not at construction, so an
adapter can be created (and serialised) without a server or model weights at hand.
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.utils import from_env, secret_from_env
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr

import backend as core_backend
from backend.config import EngineConfig
from backend.inprocess import shared_inprocess_backend
from backend.interface import Backend

# Guards the first build of each adapter's backend; a constant, not shared state.
_BUILD_LOCK = threading.Lock()


class CoreConnection(BaseModel):
    """Connection settings shared by the adapters (a mixin).

    With ``backend`` set it is used as it is. Else, with a ``base_url`` (argument or
    ``CORE_BASE_URL``) the adapter talks to that server over HTTP with ``api_key``,
    ``timeout`` and ``max_retries``; without one it runs the models in this process
    (settings from the ``CORE_*`` environment variables, see ``backend.config``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

    base_url: str | None = Field(
        default_factory=from_env(core_backend.BASE_URL_ENV, default=None),
        description="Server address, e.g. http://127.0.0.1:8000 (default: CORE_BASE_URL); "
        "unset means the in-process models.",
    )
    api_key: SecretStr | None = Field(
        default_factory=secret_from_env(core_backend.API_KEY_ENV, default=None),
        description="Bearer key for the server (default: CORE_API_KEY).",
    )
    timeout: float | None = Field(
        default=None, description="Seconds per HTTP request; unset uses the client's default."
    )
    max_retries: int | None = Field(
        default=None,
        description="Retries of failed HTTP requests; unset uses the client's default.",
    )
    backend: Backend | None = Field(
        default=None,
        exclude=True,
        description="A ready backend to use instead of building one (never serialised).",
    )

    _client: Backend | None = PrivateAttr(default=None)

    def _get_backend(self) -> Backend:
        """The backend this adapter sends requests to, built once on first use."""
        if self.backend is not None:
            return self.backend
        if self._client is None:
            with _BUILD_LOCK:
                if self._client is None:
                    self._client = self._build_backend()
        return self._client

    def _build_backend(self) -> Backend:
        if self.base_url:
            options: dict[str, Any] = {}
            if self.timeout is not None:
                options["timeout"] = self.timeout
            if self.max_retries is not None:
                options["max_retries"] = self.max_retries
            api_key = self.api_key.get_secret_value() if self.api_key else None
            return core_backend.connect(self.base_url, api_key, **options)
        return shared_inprocess_backend(EngineConfig.from_env())
