"""Prometheus metrics for one app: requests, latency, tokens, model-request load.

Each app has its own registry (no module-level state), so several apps in one process, as in
the tests, count separately. Path labels are route templates, never raw paths, to keep the
number of series bounded.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class ServerMetrics:
    """The metrics the server records, in their own registry."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "core_http_requests",
            "HTTP requests answered, by method, route and status.",
            ["method", "path", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "core_http_request_duration_seconds",
            "Time from request to the end of the response (whole stream for SSE).",
            ["method", "path"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.time_to_first_token = Histogram(
            "core_time_to_first_token_seconds",
            "Time from a streamed chat request to its first content chunk.",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "core_tokens",
            "Tokens processed, by model and kind (prompt or completion).",
            ["model", "kind"],
            registry=self.registry,
        )
        self._running = Gauge(
            "core_model_requests_running",
            "Model requests holding a place.",
            registry=self.registry,
        )
        self._queued = Gauge(
            "core_model_requests_queued",
            "Model requests waiting for a place.",
            registry=self.registry,
        )

    def watch_load(self, running: Callable[[], float], queued: Callable[[], float]) -> None:
        """Read the running and queued gauges from the limiter at scrape time."""
        self._running.set_function(running)
        self._queued.set_function(queued)

    def count_tokens(self, model: str, prompt: int, completion: int = 0) -> None:
        self.tokens.labels(model=model, kind="prompt").inc(prompt)
        if completion:
            self.tokens.labels(model=model, kind="completion").inc(completion)

    def render(self) -> bytes:
        return generate_latest(self.registry)
