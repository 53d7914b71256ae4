"""Sending JSON requests to an HTTP API with retries: pooled httpx clients, sync and async.

Shared by the HTTP backend (a core-textmodels server) and the engine backend (an
OpenAI-compatible engine), so both retry alike: failed attempts are retried ``max_retries``
times by ``backend.backends.client.retries``' rules; a response that has begun streaming never is.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, TypedDict

import httpx

from backend.backends.client.retries import (
    retry_after,
    retry_delay,
    retryable,
    status_error,
    transport_error,
)
from backend.protocol.errors import CoreError

#: Seconds for each read, write and pool wait; and retries after the first attempt. The
#: defaults of every client of the service (the adapters included).
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_CONNECT_TIMEOUT = 5.0


class TransportOptions(TypedDict, total=False):
    """The keywords of ``RetryingTransport`` after the address and key, for a client that
    passes them on (``HTTPBackend``): its signature holds their defaults."""

    timeout: float
    connect_timeout: float
    max_retries: int
    http_client: httpx.Client | None
    async_http_client: httpx.AsyncClient | None


class RetryingTransport:
    """JSON requests to ``base_url`` + path, retried; failures raise the typed errors of
    ``backend.protocol.errors``.

    Args:
        base_url: prefix of every path (already normalised by the caller).
        api_key: the bearer key; None sends no Authorization header.
        timeout: seconds for each read, write and pool wait (and between stream events).
        connect_timeout: seconds to establish a connection.
        max_retries: retries after the first attempt; 0 means exactly one attempt.
        http_client / async_http_client: clients to use instead of the pooled ones created
            on first use; the caller keeps ownership and closes them.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries}")
        self.base_url = base_url
        self.max_retries = max_retries
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._client = http_client
        self._async_client = async_http_client
        self._owns_client = http_client is None
        self._owns_async_client = async_http_client is None
        self._lock = threading.Lock()

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "core-textmodels-python"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _sync_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self._timeout)
            return self._client

    def _async_http(self) -> httpx.AsyncClient:
        with self._lock:
            if self._async_client is None:
                self._async_client = httpx.AsyncClient(timeout=self._timeout)
            return self._async_client

    def close(self) -> None:
        """Close the sync client created here (``aclose`` closes both)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()

    async def aclose(self) -> None:
        with self._lock:
            client, self._async_client = self._async_client, None
        if client is not None and self._owns_async_client:
            await client.aclose()
        self.close()

    def _request(self, client: httpx.Client | httpx.AsyncClient, method: str, path: str, body):
        return client.build_request(
            method, self.base_url + path, json=body, headers=self._headers(), timeout=self._timeout
        )

    def _wait_before_retry(
        self, attempt: int, error: CoreError, cause: BaseException | None, hint: float | None
    ) -> float:
        """Seconds to wait before attempt ``attempt + 2``; raises ``error`` when it is not
        worth retrying or no retry is left."""
        if attempt >= self.max_retries or not retryable(error):
            raise error from cause
        return retry_delay(attempt, hint)

    def send(
        self, method: str, path: str, body: Any = None, stream: bool = False
    ) -> httpx.Response:
        """The successful response (with ``stream``, its body not yet read)."""
        client = self._sync_client()
        request = self._request(client, method, path, body)
        attempt = 0
        while True:
            try:
                response = client.send(request, stream=stream)
            except httpx.TransportError as exc:
                wait = self._wait_before_retry(attempt, transport_error(exc), exc, None)
            else:
                if response.is_success:
                    return response
                if stream:
                    response.read()
                response.close()
                error, hint = status_error(response), retry_after(response.headers)
                wait = self._wait_before_retry(attempt, error, None, hint)
            time.sleep(wait)
            attempt += 1

    async def asend(
        self, method: str, path: str, body: Any = None, stream: bool = False
    ) -> httpx.Response:
        client = self._async_http()
        request = self._request(client, method, path, body)
        attempt = 0
        while True:
            try:
                response = await client.send(request, stream=stream)
            except httpx.TransportError as exc:
                wait = self._wait_before_retry(attempt, transport_error(exc), exc, None)
            else:
                if response.is_success:
                    return response
                if stream:
                    await response.aread()
                await response.aclose()
                error, hint = status_error(response), retry_after(response.headers)
                wait = self._wait_before_retry(attempt, error, None, hint)
            await asyncio.sleep(wait)
            attempt += 1
