"""Which ``Backend`` an adapter object talks to.

Over HTTP when a base URL is given (or ``CORE_BASE_URL`` is set), where ``timeout`` and
``max_retries`` go to the HTTP client, which alone retries: the adapters add no retry loop of
their own. Otherwise the in-process engine, shared by every adapter object in the process
that runs the same engine settings, so the LLM, the embedding model and the evaluator load
the models once.
"""

from __future__ import annotations

import os

from pydantic import SecretStr

from backend import API_KEY_ENV, BASE_URL_ENV, Backend, connect
from backend.config import EngineConfig


def env_base_url() -> str | None:
    """The default ``base_url`` of every adapter: ``CORE_BASE_URL``, or None (in-process)."""
    return os.environ.get(BASE_URL_ENV) or None


def env_api_key() -> SecretStr | None:
    """The default ``api_key`` of every adapter: ``CORE_API_KEY``, or None."""
    value = os.environ.get(API_KEY_ENV)
    return SecretStr(value) if value else None


def open_backend(
    base_url: str | None,
    api_key: SecretStr | str | None,
    timeout: float,
    max_retries: int,
) -> Backend:
    """The HTTP client for ``base_url``, or the shared in-process backend when it is None.

    ``timeout`` and ``max_retries`` only concern the HTTP client; in-process there is no
    connection to time out or retry.
    """
    if base_url:
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        return connect(base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries)
    return shared_in_process_backend()


def shared_in_process_backend() -> Backend:
    """The in-process backend for the engine settings in the environment, shared with the
    LangChain components (``backend.inprocess.shared_inprocess_backend``)."""
    from backend.inprocess import shared_inprocess_backend

    return shared_inprocess_backend(EngineConfig.from_env())
