"""Groundedness reports over Ray Data datasets: one row per claim.

>>> ds = ray.data.read_parquet("answers/")                  # columns id, context, response
>>> claims = groundedness_report_dataset(ds, profile="small")
>>> claims.filter(lambda row: row["verdict"] != "grounded").to_pandas()

Each input row becomes one row per claim of its response, the input's columns repeated (keep
an id column to group them by), with the columns of ``BulkRunner.check_groundedness_report``
(``backend.groundedness.report_summary.ROW_COLUMNS``: the check's verdict, support and
corrected response, the claim's number, text, offsets, verdict and support, its best
evidence) and ``error``. A row the service refuses (an empty response, a None) stays one
row, its claim columns null and its message in ``error``. The pool, the actors and what they
connect to are as for ``backend.bulk.ray_data.check_groundedness_dataset``; a server answers
reports on its own route, so over a server the supports are there too.

Needs the ``ray`` extra: ``pip install 'core-textmodels[ray]'``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import ray.data

from backend.bulk.ray_data import ActorPool, _map_pairs, _PairActor, _with_columns
from backend.groundedness.report_summary import claim_rows

__all__ = ["groundedness_report_dataset"]

#: The Arrow type of each claim column (``ROW_COLUMNS``, in their order).
COLUMN_TYPES = {
    "check_verdict": pa.string(),
    "check_support": pa.float64(),
    "corrected_response": pa.string(),
    "claim": pa.int64(),
    "claim_text": pa.string(),
    "start": pa.int64(),
    "end": pa.int64(),
    "verdict": pa.string(),
    "support": pa.float64(),
    "decided_early": pa.bool_(),
    "evidence_text": pa.string(),
    "evidence_start": pa.int64(),
    "evidence_end": pa.int64(),
    "evidence_support": pa.float64(),
}


def groundedness_report_dataset(
    dataset: ray.data.Dataset,
    context_column: str = "context",
    response_column: str = "response",
    *,
    pool: ActorPool | None = None,
    error_column: str = "error",
    **connect_options: Any,
) -> ray.data.Dataset:
    """The dataset with one row per claim of each row's response (see the module's
    docstring); an existing column named like a claim column is replaced.

    Args:
        dataset: rows with the two columns; a context is a text or a list of texts.
        Others: as for ``backend.bulk.ray_data.check_groundedness_dataset``.
    """
    columns = {"context_column": context_column, "response_column": response_column}
    return _map_pairs(dataset, _Reporter, columns, pool, error_column, connect_options)


class _Reporter(_PairActor):
    def __call__(self, batch: pa.Table) -> pa.Table:
        taken: list[int] = []  # the input row of each output row
        rows: list[dict[str, Any] | None] = []
        errors: list[str | None] = []
        for at, (claims, error) in enumerate(self._send_each_pair(batch, self._report)):
            for row in claims or [None]:  # a row without claims stays, with its error
                taken.append(at)
                rows.append(row)
                errors.append(error)
        columns = {
            name: pa.array([row[name] if row else None for row in rows], type=kind)
            for name, kind in COLUMN_TYPES.items()
        }
        columns[self.error_column] = pa.array(errors, type=pa.string())
        return _with_columns(batch.take(pa.array(taken, type=pa.int64())), columns)

    def _report(self, context: str | list[str], response: str) -> list[dict[str, Any]]:
        return claim_rows(self.service.check_groundedness_report(context, response))
