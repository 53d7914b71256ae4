"""Chat through the server: concurrent streams, and the time to first token it adds."""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from backend.testing.servers import ServerProcess
from benchmarks.chat import time_backend_stream
from benchmarks.measure import Figure, interleaved

CONCURRENT_TOKENS = 128


def chat_concurrent_vs_single(
    server: ServerProcess, repeats: int, streams: int = 4
) -> list[Figure]:
    """Aggregate decode tokens/s of ``streams`` concurrent greedy streams vs one stream alone.

    The aggregate decode rate is the sum of the streams' own decode rates (tokens after the
    first, over the time between their first and last token): how fast the server produces
    tokens for everyone at once. The end-to-end figure divides all tokens by the wall time,
    prompt evaluation included (the prompts are evaluated one after the other either way).
    """
    clients = [server.client(timeout=900) for _ in range(streams)]
    variant = iter(range(10_000, 20_000))
    end_to_end: dict[int, list[float]] = {1: [], streams: []}

    def aggregate(count: int) -> float:
        started = time.perf_counter()
        with ThreadPoolExecutor(count) as pool:
            timings = list(
                pool.map(
                    lambda client: time_backend_stream(client, next(variant), CONCURRENT_TOKENS),
                    clients[:count],
                )
            )
        end_to_end[count].append(sum(t.tokens for t in timings) / (time.perf_counter() - started))
        return sum(t.decode_rate for t in timings)

    single, concurrent = interleaved(lambda: aggregate(1), lambda: aggregate(streams), repeats)
    for client in clients:
        client.close()
    note = f"{streams} streams of ~200-token prompts and <= {CONCURRENT_TOKENS} tokens, greedy"
    return [
        Figure(
            "chat_concurrent_vs_single",
            "tokens/s",
            single,
            concurrent,
            goal=">= 2.5",
            note=note + "; sum of the streams' decode rates",
        ),
        Figure(
            "chat_concurrent_vs_single_end_to_end",
            "tokens/s",
            statistics.median(end_to_end[1]),
            statistics.median(end_to_end[streams]),
            goal="report",
            note=note + "; all tokens over the wall time, prompt evaluation included",
        ),
    ]


def chat_ttft_server_vs_inprocess(server: ServerProcess, backend, repeats: int) -> Figure:
    """Time to first token of the same requests through the server and in-process."""
    client = server.client(timeout=900)
    variants = iter(range(20_000, 30_000))

    def ttft(subject) -> float:
        return time_backend_stream(subject, next(variants), max_tokens=4).ttft

    inprocess, served = interleaved(lambda: ttft(backend), lambda: ttft(client), repeats)
    client.close()
    return Figure(
        "chat_ttft_server_vs_inprocess",
        "s",
        inprocess,
        served,
        goal="<= 1.1",
        note="~200-token prompts, streamed",
    )
