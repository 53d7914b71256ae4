"""Embeddings and groundedness checks over Ray Data datasets, on one machine or a cluster.

>>> ds = ray.data.read_parquet("texts/")
>>> ds = embed_dataset(ds, column="text", profile="small")      # adds `embedding`, `error`
>>> ds.write_parquet("embedded/")

Each function adds its result columns to every row (the other columns are kept) in
``map_batches`` over a pool of actors (``pool=ActorPool(concurrency=8, num_cpus=4)``: how
many, what each reserves; by default one running the models). Each actor builds one backend with
``backend.connect(**connect_options)``: the in-process models (loaded once per actor), a
core-textmodels server (``base_url=...``) or an OpenAI-compatible engine (``engine_url=...``).
The actors build it themselves from those arguments, so the same call runs on a local Ray
(``ray.init()``) and on a cluster (``ray job submit``); what they need goes in the
arguments, since a cluster's workers see neither the driver's files nor its environment.

A row the service refuses (an empty string, a None, a text over the token limit) gets the
message in its ``error`` column and empty results; every other row completes. Requests are
planned as ``BulkRunner`` plans them (``plan_embedding_requests``), repeated texts in a batch
are sent once, and a refused request is split to find its bad rows
(``backend.bulk.refusals``: the rule ``BulkRunner`` follows too). Other errors (a wrong key,
the service down after the client's retries) fail the job: they would fail every row alike.

The groundedness report, one row per claim: ``backend.bulk.ray_report``.

Needs the ``ray`` extra: ``pip install 'core-textmodels[ray]'``.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

try:
    import pyarrow as pa
    import ray.data
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "backend.bulk.ray_data runs on Ray Data, which is not installed: "
        "pip install 'core-textmodels[ray]'"
    ) from exc
import numpy as np

from backend import connect
from backend.bulk.refusals import REFUSALS, is_text, send_apart
from backend.interface import Backend
from backend.protocol.catalogue import InputType, embedding_model
from backend.protocol.errors import CoreError
from backend.protocol.limits import plan_embedding_requests

__all__ = ["ActorPool", "check_groundedness_dataset", "embed_dataset"]

T = TypeVar("T")

#: Rows per batch handed to an actor. An embedding batch is split into requests within the
#: API's limits (at most 100 texts each), so 200 makes two full requests; a groundedness
#: check is one request per row, and small batches spread rows evenly over the actors.
EMBEDDING_BATCH_SIZE = 200
GROUNDEDNESS_BATCH_SIZE = 16

#: The default pools reserve one CPU in all, leaving the others to the tasks that read and
#: write the dataset (a pool holding every CPU starves them: the job never ends). Actors
#: running the models hold them in memory, so there is one, with one CPU (torch then uses one
#: thread: pass ``num_cpus`` to give it more); actors that only send requests to a server
#: or an engine are light, so there are four, sharing that CPU.
IN_PROCESS_POOL = (1, 1.0)
REMOTE_POOL = (4, 0.25)
#: ``backend.connect`` options that send the requests elsewhere (a server, an engine).
REMOTE_OPTIONS = ("base_url", "engine_url", "embeddings_url")

VECTOR_TYPE = pa.list_(pa.float32())


@dataclass(frozen=True)
class ActorPool:
    """The actors that run a step, as ``map_batches`` takes them; apart from the
    ``backend.connect`` options, which go to each actor.

    Args:
        concurrency: actors in the pool, or ``(min, max)`` to let Ray scale it (default: one
            actor running the models, four sending requests to a server or engine).
        batch_size: rows per batch an actor handles (default: the step's,
            ``EMBEDDING_BATCH_SIZE`` or ``GROUNDEDNESS_BATCH_SIZE``).
        num_cpus / num_gpus: reserved per actor (default: see ``IN_PROCESS_POOL``); leave
            the cluster a CPU for the tasks that read and write the dataset.
        ray_remote_args: more options of each actor for ``map_batches`` (``memory``,
            ``runtime_env={"env_vars": {"CORE_CHAT_THREADS": "4"}}``...).
    """

    concurrency: int | tuple[int, int] | None = None
    batch_size: int | None = None
    num_cpus: float | None = None
    num_gpus: float | None = None
    ray_remote_args: Mapping[str, Any] | None = None

    def map(
        self,
        dataset: ray.data.Dataset,
        actor_class: type[_BackendActor],
        actor_options: dict[str, Any],
        batch_size: int,
    ) -> ray.data.Dataset:
        """``map_batches`` of ``actor_class(**actor_options)`` over the pool; the defaults
        of the fields left unset come from ``_default_pool`` and ``batch_size``."""
        actors, cpus = _default_pool(actor_options["connect_options"])
        size = actors if self.concurrency is None else self.concurrency
        if isinstance(size, int):
            compute = ray.data.ActorPoolStrategy(size=size)
        else:
            compute = ray.data.ActorPoolStrategy(min_size=size[0], max_size=size[1])
        return dataset.map_batches(
            actor_class,
            fn_constructor_kwargs=actor_options,
            batch_format="pyarrow",
            batch_size=self.batch_size or batch_size,
            compute=compute,
            num_cpus=cpus if self.num_cpus is None else self.num_cpus,
            num_gpus=self.num_gpus,
            **(self.ray_remote_args or {}),
        )


def embed_dataset(
    dataset: ray.data.Dataset,
    column: str = "text",
    kind: str = "passage",
    *,
    pool: ActorPool | None = None,
    error_column: str = "error",
    **connect_options: Any,
) -> ray.data.Dataset:
    """The dataset with an ``embedding`` column: each text's L2-normalised float32 vector
    (null where the row failed) and an ``error`` column (null where it succeeded).

    Args:
        dataset: rows with a text ``column``.
        kind: ``"passage"`` for documents or ``"query"`` for questions: picks the catalogue
            model (``backend.protocol.catalogue.embedding_model``).
        pool: the actors (default ``ActorPool()``: see its fields' defaults).
        error_column: where failures go; an existing column of that name is replaced, so
            give another name when chaining this with ``check_groundedness_dataset``.
        **connect_options: for ``backend.connect`` in each actor (``profile="small"``,
            ``base_url=..., api_key=...``, ``engine_url=...``).

    Returns:
        A lazy dataset: nothing runs until it is consumed (``write_parquet``, ``to_pandas``...).

    Raises:
        ValueError: ``kind`` is neither ``"query"`` nor ``"passage"`` (raised at once).
    """
    model = embedding_model(InputType(kind))
    embedder = _actor_options(connect_options, error_column, column=column, model=model)
    return (pool or ActorPool()).map(dataset, _Embedder, embedder, EMBEDDING_BATCH_SIZE)


def check_groundedness_dataset(
    dataset: ray.data.Dataset,
    context_column: str = "context",
    response_column: str = "response",
    *,
    pool: ActorPool | None = None,
    error_column: str = "error",
    **connect_options: Any,
) -> ray.data.Dataset:
    """The dataset with the groundedness check of each row's response against its context:
    ``verdict`` (``grounded``, ``notGrounded`` or ``notSure``), ``support`` (the judge's
    support in [0, 1], null where the backend does not report it: a server) and ``error``;
    a failed row has a null verdict and support and its message in ``error``.

    Args:
        dataset: rows with the two columns; a context is a text or a list of texts
            (retrieved documents, joined as ``Backend.check_groundedness`` joins them).
        Others: as for ``embed_dataset`` (the pool's default ``batch_size``:
            ``GROUNDEDNESS_BATCH_SIZE``).
    """
    columns = {"context_column": context_column, "response_column": response_column}
    return _map_pairs(dataset, _GroundednessChecker, columns, pool, error_column, connect_options)


def _map_pairs(
    dataset: ray.data.Dataset,
    actor_class: type[_PairActor],
    columns: dict[str, str],
    pool: ActorPool | None,
    error_column: str,
    connect_options: dict[str, Any],
) -> ray.data.Dataset:
    """``dataset`` mapped by ``actor_class`` over its (context, response) ``columns``, in
    batches of ``GROUNDEDNESS_BATCH_SIZE``: one request per row, as each pair actor sends."""
    options = _actor_options(connect_options, error_column, **columns)
    return (pool or ActorPool()).map(dataset, actor_class, options, GROUNDEDNESS_BATCH_SIZE)


def _actor_options(
    connect_options: dict[str, Any], error_column: str, **columns: str
) -> dict[str, Any]:
    """The keywords each actor is built with: what it connects to, and its columns."""
    return {"connect_options": connect_options, "error_column": error_column, **columns}


def _default_pool(connect_options: dict[str, Any]) -> tuple[int, float]:
    """Actors and CPUs per actor when not given: ``REMOTE_POOL`` where the options name a
    server or an engine, else ``IN_PROCESS_POOL``. (A ``CORE_BASE_URL`` in the workers'
    environment is not seen here: name the server in the options.)"""
    remote = any(connect_options.get(name) for name in REMOTE_OPTIONS)
    return REMOTE_POOL if remote else IN_PROCESS_POOL


class _BackendActor:
    """One backend per actor, built there from the options and closed with the actor (Ray
    Data deletes the callable when the pool shuts down)."""

    def __init__(self, connect_options: dict[str, Any], error_column: str) -> None:
        self.error_column = error_column
        self.service: Backend = connect(**connect_options)

    def __del__(self) -> None:
        service = getattr(self, "service", None)  # absent when __init__ failed
        if service is not None:
            service.close()


class _Embedder(_BackendActor):
    def __init__(
        self, connect_options: dict[str, Any], column: str, model: str, error_column: str
    ) -> None:
        super().__init__(connect_options, error_column)
        self.column = column
        self.model = model

    def __call__(self, batch: pa.Table) -> pa.Table:
        values = _column(batch, self.column).to_pylist()
        texts = list(dict.fromkeys(value for value in values if is_text(value)))
        vectors: dict[str, np.ndarray] = {}
        refused: dict[str, str] = {}
        for request in plan_embedding_requests(texts):
            for sent, outcome in send_apart(request, self._embed):
                if isinstance(outcome, CoreError):
                    refused[sent[0]] = str(outcome)
                else:
                    vectors.update(zip(sent, outcome, strict=True))
        embeddings = [vectors.get(value) if is_text(value) else None for value in values]
        errors = [
            refused.get(value) if is_text(value) else _not_text(self.column, value)
            for value in values
        ]
        return _with_columns(
            batch,
            {
                "embedding": pa.array(embeddings, type=VECTOR_TYPE),
                self.error_column: pa.array(errors, type=pa.string()),
            },
        )

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        result = self.service.embed({"model": self.model, "input": list(texts)})
        return np.asarray(result.float_vectors(len(texts)), dtype=np.float32)


class _PairActor(_BackendActor):
    """An actor sending each row's (context, response) pair: the steps the groundedness
    check and the report share, so that both judge a row alike."""

    def __init__(
        self,
        connect_options: dict[str, Any],
        context_column: str,
        response_column: str,
        error_column: str,
    ) -> None:
        super().__init__(connect_options, error_column)
        self.context_column = context_column
        self.response_column = response_column

    def _send_each_pair(
        self, batch: pa.Table, send: Callable[[str | list[str], str], T]
    ) -> list[tuple[T | None, str | None]]:
        """Each row's ``(send(context, response), None)``, or ``(None, error)`` for a row
        that is not sent (a context or response that is not text) or that the service
        refuses. A repeated pair is sent once."""
        contexts = _column(batch, self.context_column).to_pylist()
        responses = _column(batch, self.response_column).to_pylist()
        outcomes: list[tuple[T | None, str | None]] = []
        done: dict[tuple[Any, str], tuple[T | None, str | None]] = {}
        for context, response in zip(contexts, responses, strict=True):
            problem = _context_problem(self.context_column, context) or (
                None if is_text(response) else _not_text(self.response_column, response)
            )
            if problem is not None:
                outcomes.append((None, problem))
                continue
            key = (context if isinstance(context, str) else tuple(context), response)
            if key not in done:
                done[key] = _unless_refused(send, context, response)
            outcomes.append(done[key])
        return outcomes


def _unless_refused(
    send: Callable[[str | list[str], str], T], context: str | list[str], response: str
) -> tuple[T | None, str | None]:
    """``(send(...), None)``, or ``(None, message)`` when the service refuses the row."""
    try:
        return send(context, response), None
    except REFUSALS as error:
        return None, str(error)


class _GroundednessChecker(_PairActor):
    def __call__(self, batch: pa.Table) -> pa.Table:
        verdicts: list[str | None] = []
        supports: list[float | None] = []
        errors: list[str | None] = []
        for checked, error in self._send_each_pair(batch, self._check):
            verdict, support = checked or (None, None)
            verdicts.append(verdict)
            supports.append(support)
            errors.append(error)
        return _with_columns(
            batch,
            {
                "verdict": pa.array(verdicts, type=pa.string()),
                "support": pa.array(supports, type=pa.float64()),
                self.error_column: pa.array(errors, type=pa.string()),
            },
        )

    def _check(self, context: str | list[str], response: str) -> tuple[str, float | None]:
        result = self.service.check_groundedness(context, response)
        return result.verdict, result.support


def _column(batch: pa.Table, name: str) -> pa.ChunkedArray:
    if name not in batch.column_names:
        raise KeyError(f"the dataset has no column {name!r}; its columns: {batch.column_names}")
    return batch.column(name)


def _with_columns(batch: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    """``batch`` with ``columns`` set: an existing one replaced in place, a new one appended."""
    for name, values in columns.items():
        if name in batch.column_names:
            batch = batch.set_column(batch.column_names.index(name), name, values)
        else:
            batch = batch.append_column(name, values)
    return batch


def _not_text(column: str, value: object) -> str:
    """The error of a value that is not sent (``is_text``): what the row holds instead."""
    return f"column {column!r} must hold a non-empty string, not {reprlib.repr(value)}"


def _context_problem(column: str, value: object) -> str | None:
    """None for a context that is sent: a text, or a non-empty list of texts."""
    if is_text(value):
        return None
    if isinstance(value, list) and value and all(is_text(text) for text in value):
        return None
    if isinstance(value, list):
        return f"column {column!r} must hold texts, not {reprlib.repr(value)}"
    return _not_text(column, value)
