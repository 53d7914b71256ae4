"""Embedding and groundedness checks over many rows: lists, pandas Series and DataFrames.

``BulkRunner`` sends the rows in requests within the service's limits (spec section 8, see
``backend.protocol.limits``), shows a progress bar, and is safe to interrupt: every finished
request is kept in its ``ResultStore``, so running the same call again (after a
``KeyboardInterrupt``, an error, or in a later session with a store on disk) asks only for the
rows not done yet. Repeated texts are sent once. It works over any ``Backend``, in-process or
HTTP. pandas is needed only for the DataFrame helpers.

>>> runner = BulkRunner(backend.connect())
>>> vectors = runner.embed(df["text"])                   # NumPy array, one row per text
>>> df["verdict"] = runner.check_groundedness(df, context="context", answer="answer")
>>> claims = runner.check_groundedness_report(df)       # one row per claim of each answer
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from backend.bulk.refusals import is_text, send_apart
from backend.bulk.result_store import ResultStore, result_key
from backend.groundedness.report_summary import ROW_COLUMNS, claim_rows
from backend.groundedness.request import groundedness_request, read_verdict
from backend.interface import Backend
from backend.protocol.catalogue import GROUNDEDNESS_MODEL, PASSAGE_MODEL
from backend.protocol.errors import CoreError
from backend.protocol.groundedness_report import GroundednessReport
from backend.protocol.limits import (
    MAX_EMBEDDING_INPUTS,
    MAX_TOKENS_PER_EMBEDDING_REQUEST,
    plan_embedding_requests,
)

if TYPE_CHECKING:
    import pandas as pd


def _as_texts(texts: Iterable[Any], what: str) -> list[str]:
    """The texts as a list of non-empty strings; a clear error names the rows that are not."""
    if isinstance(texts, str):
        raise TypeError(f"{what} must be a list or Series of strings, not one string")
    values = texts.tolist() if hasattr(texts, "tolist") else list(texts)
    # A Series names its rows by its index; anything else by position.
    labels = list(texts.index) if hasattr(texts, "tolist") and hasattr(texts, "index") else None
    labels = labels or list(range(len(values)))
    bad = [at for at, v in zip(labels, values, strict=True) if not is_text(v)]
    if bad:
        shown = ", ".join(repr(label) for label in bad[:5]) + (" ..." if len(bad) > 5 else "")
        raise ValueError(
            f"{what} must be non-empty strings; {len(bad)} are not (rows {shown}); drop or "
            "fill them first (e.g. series.dropna(), series.str.strip() != '')"
        )
    return values


class BulkRunner:
    """Embeds texts and checks groundedness row by row, resumably.

    Args:
        service: the backend requests go to (``backend.connect()``).
        store: where finished results are kept (default: a new in-memory ``ResultStore``,
            living as long as this runner); ``ResultStore("file.sqlite")`` survives restarts.
        progress: show a progress bar: True for ``tqdm.auto`` (a widget in Jupyter, text
            elsewhere), a tqdm class to choose (``tqdm.tqdm`` draws text, which a saved
            notebook keeps readable outside Jupyter), False for none.
        max_inputs / max_tokens: limits of one embedding request (the spec's by default).
    """

    def __init__(
        self,
        service: Backend,
        store: ResultStore | None = None,
        *,
        progress: bool | type[tqdm] = True,
        max_inputs: int = MAX_EMBEDDING_INPUTS,
        max_tokens: int = MAX_TOKENS_PER_EMBEDDING_REQUEST,
    ) -> None:
        self.service = service
        self.store = store if store is not None else ResultStore()
        self.progress = progress
        self.max_inputs = max_inputs
        self.max_tokens = max_tokens

    def _bar(self, total: int, done: int, desc: str, unit: str) -> tqdm:
        bar_class = tqdm if self.progress is True or not self.progress else self.progress
        return bar_class(total=total, initial=done, desc=desc, unit=unit, disable=not self.progress)

    # ------------------------------------------------------------------ embeddings

    def embed(self, texts: Iterable[str], model: str = PASSAGE_MODEL) -> np.ndarray:
        """One L2-normalised float32 row per text, in input order.

        Args:
            texts: a list or pandas Series of non-empty strings.
            model: ``PASSAGE_MODEL`` for documents (default) or ``QUERY_MODEL`` for questions.

        Raises:
            ValueError: a text is empty or not a string (nothing is sent).
            backend.CoreError: the service refused a text (e.g. over 4000 tokens); the
                texts finished before it are kept.
        """
        texts = _as_texts(texts, "texts")
        keys = {text: result_key("embedding", model, text) for text in dict.fromkeys(texts)}
        done = self.store.get_many(keys.values())
        missing = [text for text, key in keys.items() if key not in done]
        with self._bar(len(keys), len(keys) - len(missing), "embedding", "text") as bar:
            for batch in plan_embedding_requests(missing, self.max_inputs, self.max_tokens):
                done.update(self._embed_batch(batch, model, keys, bar))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([np.frombuffer(done[keys[text]], dtype="<f4") for text in texts])

    def embed_frame(self, texts: Iterable[str], model: str = PASSAGE_MODEL) -> pd.DataFrame:
        """``embed`` as a DataFrame: one row per text (the Series' index, if any), one
        column per dimension."""
        import pandas as pd

        vectors = self.embed(texts, model)
        index = texts.index if isinstance(texts, pd.Series) else None
        return pd.DataFrame(vectors, index=index)

    def _embed_batch(
        self, batch: Sequence[str], model: str, keys: dict[str, str], bar: tqdm
    ) -> dict[str, bytes]:
        """Embed and store one request's texts. When the service refuses a request of
        several texts, its halves are tried apart (``send_apart``), so the one bad text is
        found and raised while the others are kept."""
        values: dict[str, bytes] = {}

        def send(texts: Sequence[str]) -> list[list[float]]:
            result = self.service.embed({"model": model, "input": list(texts)})
            return result.float_vectors(len(texts))

        for texts, vectors in send_apart(batch, send):
            if isinstance(vectors, CoreError):
                raise vectors
            done = {
                keys[text]: np.asarray(vector, dtype="<f4").tobytes()
                for text, vector in zip(texts, vectors, strict=True)
            }
            self.store.put_many(done)
            bar.update(len(texts))
            values.update(done)
        return values

    # ------------------------------------------------------------------ groundedness

    def check_groundedness(
        self,
        frame: pd.DataFrame,
        context: str = "context",
        answer: str = "answer",
        model: str = GROUNDEDNESS_MODEL,
    ) -> pd.Series:
        """The verdict (``grounded``, ``notGrounded`` or ``notSure``) of each row's answer
        against its context, as a Series on the frame's index named ``verdict``.

        Args:
            frame: a DataFrame with the two text columns.
            context / answer: the names of those columns.

        Raises:
            ValueError: a context or answer is empty or not a string (nothing is sent).
            backend.CoreError: the service refused a row; the rows before it are kept.
        """
        import pandas as pd

        verdicts = self._each_row(
            frame, context, answer, "groundedness", model, self._check, "groundedness"
        )
        return pd.Series(verdicts, index=frame.index, name="verdict", dtype="object")

    def groundedness_reports(
        self,
        frame: pd.DataFrame,
        context: str = "context",
        answer: str = "answer",
        model: str = GROUNDEDNESS_MODEL,
    ) -> pd.Series:
        """The groundedness report (``GroundednessReport``: the verdict, each claim with its
        verdict, support and offsets, the corrected response) of each row's answer against
        its context, as a Series on the frame's index named ``report``. Resumable like
        ``check_groundedness``; the reports are kept in the store as JSON.

        Raises:
            As ``check_groundedness``.
        """
        import pandas as pd

        stored = self._each_row(
            frame, context, answer, "groundedness_report", model, self._report, "report"
        )
        reports = [GroundednessReport.model_validate_json(report) for report in stored]
        return pd.Series(reports, index=frame.index, name="report", dtype="object")

    def check_groundedness_report(
        self,
        frame: pd.DataFrame,
        context: str = "context",
        answer: str = "answer",
        model: str = GROUNDEDNESS_MODEL,
    ) -> pd.DataFrame:
        """One row per claim of each row's answer (``groundedness_reports`` flattened):
        ``row`` (the frame's index label), the check's ``check_verdict``, ``check_support``
        and ``corrected_response``, the claim's number in its answer (``claim``, from 0),
        ``claim_text``, ``start``, ``end`` (code points in the answer), ``verdict``,
        ``support`` and ``decided_early``, and its best evidence's ``evidence_text``,
        ``evidence_start``, ``evidence_end`` (in the context) and ``evidence_support``
        (``backend.groundedness.report_summary.claim_rows``).

        >>> claims = runner.check_groundedness_report(df)
        >>> claims[claims.verdict != "grounded"]            # what the contexts do not support
        """
        import pandas as pd

        reports = self.groundedness_reports(frame, context, answer, model)
        rows = [
            {"row": label, **row} for label, report in reports.items() for row in claim_rows(report)
        ]
        return pd.DataFrame(rows, columns=["row", *ROW_COLUMNS])

    def _each_row(
        self,
        frame: pd.DataFrame,
        context: str,
        answer: str,
        operation: str,
        model: str,
        compute: Callable[[tuple[str, str], str], str],
        desc: str,
    ) -> list[str]:
        """``compute(pair, model)`` of each row's (context, answer), in row order: the rows'
        texts checked first (nothing is sent if one is not a text), each distinct pair
        computed once, the stored ones read from the store and each new one stored as soon
        as it is done (so an interrupted run resumes); ``desc`` names the progress bar."""
        pairs = _pairs(frame, context, answer)
        keys = {pair: result_key(operation, model, *pair) for pair in dict.fromkeys(pairs)}
        stored = self.store.get_many(keys.values())
        done = {pair: stored[key] for pair, key in keys.items() if key in stored}
        missing = [pair for pair in keys if pair not in done]
        with self._bar(len(keys), len(done), desc, "row") as bar:
            for pair in missing:
                value = compute(pair, model)
                self.store.put_many({keys[pair]: value})
                done[pair] = value
                bar.update(1)
        return [done[pair] for pair in pairs]

    def _check(self, pair: tuple[str, str], model: str) -> str:
        context, answer = pair
        return read_verdict(self.service.chat(groundedness_request(context, answer, model=model)))

    def _report(self, pair: tuple[str, str], model: str) -> str:
        context, answer = pair
        report = self.service.check_groundedness_report(context, answer, model=model)
        return report.model_dump_json()


def _pairs(frame: pd.DataFrame, context: str, answer: str) -> list[tuple[str, str]]:
    """Each row's (context, answer), checked to be texts."""
    contexts = _as_texts(frame[context], f"column {context!r}")
    answers = _as_texts(frame[answer], f"column {answer!r}")
    return list(zip(contexts, answers, strict=True))
