"""Which ``Backend`` an adapter object talks to, from the connection settings every adapter
shares (``backend.ConnectionSettings``).

Over HTTP when a base URL is given (or ``CORE_BASE_URL`` is set), where ``timeout`` and
``max_retries`` go to the HTTP client, which alone retries: the adapters add no retry loop of
their own. Otherwise a handle on the in-process backend shared by every adapter object in the
process that runs the same engine settings, so the LLM, the embedding model and the evaluator
load the models once.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr

from backend import ConnectionSettings
from backend.interface import Backend


class CoreConnection(ConnectionSettings):
    """The connection settings of ``Core``, ``CoreEmbedding`` and ``CoreGroundednessEvaluator``
    (a mixin), and the backend they open from them.

    Args:
        base_url, api_key, timeout, max_retries, and the engine options (engine_url,
            chat_model, embeddings_url, embedding_model, engine_api_key, grounded_at,
            not_grounded_below, judge_calibration): see ``ConnectionSettings``.
        backend: a ready ``Backend`` to use instead (tests, or one shared client); it stays
            the caller's.
    """

    _backend: Backend | None = PrivateAttr(default=None)
    _owns_backend: bool = PrivateAttr(default=False)

    def __init__(self, *, backend: Backend | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._backend = backend

    def get_backend(self) -> Backend:
        """The backend requests go to, opened on first use."""
        # getattr: LlamaIndex's pickling drops an unpicklable backend (worker processes).
        if getattr(self, "_backend", None) is None:
            self._backend = self.connect()
            self._owns_backend = True
        return self._backend

    def close(self) -> None:
        """Close the client this object opened, or give up its share of the in-process
        models (others sharing them keep working); a ``backend`` passed in is the caller's."""
        if getattr(self, "_owns_backend", False) and self._backend is not None:
            backend, self._backend = self._backend, None
            backend.close()
