"""The HTTP client: ``HTTPBackend``, the ``Backend`` interface answered by a server of this
API, with its retry policy and stream decoding."""

from backend.backends.client.http import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, HTTPBackend

__all__ = ["DEFAULT_MAX_RETRIES", "DEFAULT_TIMEOUT", "HTTPBackend"]
