"""Work over many rows: ``BulkRunner`` embeds texts and checks groundedness over lists, pandas
Series and DataFrames, resumably, keeping finished results in a ``ResultStore``.

>>> from backend.bulk import BulkRunner, ResultStore
>>> runner = BulkRunner(backend.connect(), ResultStore("results.sqlite"))
"""

from backend.bulk.result_store import ResultStore
from backend.bulk.runner import BulkRunner
from backend.protocol.catalogue import GROUNDEDNESS_MODEL, PASSAGE_MODEL, QUERY_MODEL

__all__ = ["GROUNDEDNESS_MODEL", "PASSAGE_MODEL", "QUERY_MODEL", "BulkRunner", "ResultStore"]
