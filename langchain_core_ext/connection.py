"""How the LangChain adapters reach the service: an injected ``Backend``, or the connection
settings every adapter shares (``backend.ConnectionSettings``: the HTTP client, or one
in-process backend shared by every adapter in the process).

The settings are the same on ``ChatCore``, ``CoreEmbeddings`` and ``CoreGroundednessCheck``,
so they live on one mixin. The backend is built on first use, not at construction, so an
adapter can be created (and serialised) without a server or model weights at hand.
"""

from __future__ import annotations

import threading

from pydantic import ConfigDict, Field, PrivateAttr

from backend import ConnectionSettings
from backend.interface import Backend

# Guards the first build of each adapter's backend; a constant, not shared state.
_BUILD_LOCK = threading.Lock()


class CoreConnection(ConnectionSettings):
    """Connection settings shared by the adapters (a mixin).

    With ``backend`` set it is used as it is. Else, with a ``base_url`` (argument or
    ``CORE_BASE_URL``) the adapter talks to that server over HTTP with ``api_key``,
    ``timeout`` and ``max_retries``; with an ``engine_url`` (or ``CORE_ENGINE_URL``) it runs
    the service in front of that OpenAI-compatible engine (``chat_model``,
    ``embeddings_url``... as for ``backend.connect``); with neither it runs the models in
    this process (settings from the ``CORE_*`` environment variables, see
    ``backend.backends.local.config``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

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
                    self._client = self.connect()
        return self._client

    def close(self) -> None:
        """Close the client this adapter built, or give up its share of the in-process
        models (others sharing them keep working); an injected ``backend`` is the caller's."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
