"""core-textmodels: chat completions (tools, streaming), groundedness checks and
query/passage embeddings, in-process on local models or over HTTP.

>>> import backend
>>> service = backend.connect()                       # in-process, embedded models
>>> reply = service.chat({"model": "core-1-mini-chat",
...                       "messages": [{"role": "user", "content": "Hello!"}]})
>>> remote = backend.connect(base_url="http://127.0.0.1:8000", api_key="...")  # HTTP
"""

from __future__ import annotations

import os
from typing import Any

from backend.errors import (
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
from backend.interface import Backend

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "Backend",
    "BadRequestError",
    "CoreError",
    "InternalServerError",
    "NotFoundError",
    "RateLimitError",
    "RequestTooLargeError",
    "ServiceUnavailableError",
    "connect",
]

BASE_URL_ENV = "CORE_BASE_URL"
API_KEY_ENV = "CORE_API_KEY"


def connect(base_url: str | None = None, api_key: str | None = None, **options: Any) -> Backend:
    """Return a ``Backend``: over HTTP when a base URL is given (or ``CORE_BASE_URL`` is set),
    else the in-process engine.

    Args:
        base_url: the server's address, e.g. ``http://127.0.0.1:8000``.
        api_key: the bearer key for the server (default ``CORE_API_KEY``).
        **options: for HTTP, client options (``timeout``, ``max_retries``...); in-process,
            ``EngineConfig`` fields (``profile="small"``, ``chat_model=...``, ``device=...``).
    """
    base_url = base_url or os.environ.get(BASE_URL_ENV) or None
    if base_url:
        from backend.http_client import HTTPBackend

        return HTTPBackend(
            base_url=base_url, api_key=api_key or os.environ.get(API_KEY_ENV), **options
        )
    from backend.inprocess import InProcessBackend

    return InProcessBackend(**options)
