"""Embedding throughput: our engine vs sentence-transformers, and the server under concurrency."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from backend.embeddings.windows import WindowedEncoder
from backend.engines.transformers_embeddings import TransformersEmbeddingEngine
from backend.engines.weights.embedded_e5 import resolve_embedding_model
from backend.protocol.catalogue import PASSAGE_MODEL, InputType
from backend.testing.servers import ServerProcess
from benchmarks.measure import Figure, interleaved, timed
from benchmarks.texts import mixed_texts, short_requests

MODEL = "multilingual-e5-small"
BATCH_SIZE = 32


def inprocess_vs_sentence_transformers(repeats: int, device: str = "cpu") -> Figure:
    """512 mixed texts, texts/s: ``SentenceTransformer.encode`` vs our engine, same weights,
    both on ``device`` (the figure's name ends in the device when it is not the CPU)."""
    from sentence_transformers import SentenceTransformer

    folder = resolve_embedding_model(MODEL)
    texts = mixed_texts(512)
    ours = WindowedEncoder(TransformersEmbeddingEngine(folder, device=device))
    # The same folder: sentence-transformers adds mean pooling to a plain transformers model.
    baseline = SentenceTransformer(folder, device=device)
    prefixed = [ours.prefixes.passage + text for text in texts]

    outputs: dict[str, np.ndarray] = {}

    def run_baseline(batch=prefixed) -> None:
        outputs["baseline"] = baseline.encode(
            batch, batch_size=BATCH_SIZE, normalize_embeddings=True
        )

    def run_ours(batch=texts) -> None:
        outputs["ours"] = ours.embed(batch, InputType.PASSAGE)

    run_baseline(prefixed[:BATCH_SIZE])  # warm-up
    run_ours(texts[:BATCH_SIZE])
    base_s, ours_s = interleaved(lambda: timed(run_baseline), lambda: timed(run_ours), repeats)
    # sentence-transformers in float32 is the quality reference.
    worst_cosine = float(np.min(np.sum(outputs["baseline"] * outputs["ours"], axis=1)))
    longest = max(len(ids) + 2 for ids in ours.tokenize(texts, InputType.PASSAGE).content_ids)
    return Figure(
        "embed_inprocess_vs_sentence_transformers" + ("" if device == "cpu" else f"_{device}"),
        "texts/s",
        len(texts) / base_s,
        len(texts) / ours_s,
        goal=">= 2.0",
        note=(
            f"512 texts of 10-250 words (longest {longest} tokens); sentence-transformers float32, "
            f"batch {BATCH_SIZE}; ours {str(ours.engine.model.dtype).removeprefix('torch.')} "
            f"(the engine's default on {device}), length-sorted batches under a token budget; "
            f"lowest cosine to the float32 reference {worst_cosine:.5f}"
        ),
    )


def server_concurrent_vs_sequential(
    server: ServerProcess, repeats: int, clients: int = 16
) -> Figure:
    """Aggregate texts/s through the server: ``clients`` at once vs the same requests in turn."""
    requests = short_requests(clients)
    total = sum(len(texts) for texts in requests)
    http = [server.client(timeout=300) for _ in range(clients)]

    def embed(index: int) -> None:
        answer = http[index].embed({"model": PASSAGE_MODEL, "input": requests[index]})
        assert len(answer.data) == len(requests[index])

    def sequential() -> float:
        return timed(lambda: [embed(i) for i in range(clients)])

    def concurrent() -> float:
        with ThreadPoolExecutor(clients) as pool:
            started = time.perf_counter()
            list(pool.map(embed, range(clients)))
            return time.perf_counter() - started

    concurrent()  # warm-up: connections open, model loaded
    base_s, ours_s = interleaved(sequential, concurrent, repeats)
    for client in http:
        client.close()
    return Figure(
        "embed_server_concurrent_vs_sequential",
        "texts/s",
        total / base_s,
        total / ours_s,
        goal=">= 3.0",
        note=f"{clients} clients, {total} texts of 3-20 words in requests of 1-8",
    )
