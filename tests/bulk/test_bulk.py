"""BulkRunner: requests within the limits, order kept, repeats sent once, interruption and
resume without recomputation, over a counting fake backend and the in-process backend."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from tqdm import tqdm

from backend.backends.local import InProcessBackend
from backend.bulk import PASSAGE_MODEL, QUERY_MODEL, BulkRunner
from backend.bulk.result_store import ResultStore
from backend.protocol.errors import BadRequestError
from backend.protocol.limits import (
    MAX_EMBEDDING_INPUTS,
    MAX_TOKENS_PER_EMBEDDING_REQUEST,
    token_upper_bound,
)
from backend.protocol.schemas import ChatCompletion, Embedding, EmbeddingList, EmbeddingUsage
from backend.testing import CharCountEmbeddingEngine, ScriptedChatEngine, StubBackend


def _vector(text: str) -> list[float]:
    """A vector that identifies its text: its length and first code point."""
    return [float(len(text)), float(ord(text[0])), 1.0]


class CountingBackend(StubBackend):
    """Records every request; raises ``interrupt_on`` at the given call number (1-based)."""

    def __init__(self, interrupt_at: int | None = None, interrupt_with: type = KeyboardInterrupt):
        self.embed_requests: list[tuple[str, list[str]]] = []
        self.chat_requests: list[dict] = []
        self.interrupt_at = interrupt_at
        self.interrupt_with = interrupt_with

    def _count(self) -> None:
        if len(self.embed_requests) + len(self.chat_requests) == self.interrupt_at:
            self.interrupt_at = None
            raise self.interrupt_with("interrupted")

    def embed(self, request):
        texts = request["input"]
        assert len(texts) <= MAX_EMBEDDING_INPUTS
        if any(text == "REFUSED" for text in texts):
            raise BadRequestError("invalid request: input has too many tokens")
        self.embed_requests.append((request["model"], list(texts)))
        self._count()
        data = [Embedding(index=i, embedding=_vector(t)) for i, t in enumerate(texts)]
        data.reverse()  # the service may list them in any order; index says which is which
        return EmbeddingList(
            data=data, model=request["model"], usage=EmbeddingUsage(prompt_tokens=1, total_tokens=1)
        )

    def chat(self, request):
        self.chat_requests.append(request)
        self._count()
        context, answer = (m["content"] for m in request["messages"])
        verdict = "grounded" if answer in context else "notGrounded"
        return ChatCompletion.model_validate(
            {
                "id": "c",
                "created": 0,
                "model": request["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": verdict},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )


def _texts(n: int) -> list[str]:
    return [f"text number {i}" for i in range(n)]


# ---------------------------------------------------------------- embeddings: batching, order


def test_more_texts_than_one_request_takes_go_in_several_requests_in_order():
    service = CountingBackend()
    texts = _texts(250)
    vectors = BulkRunner(service, progress=False).embed(texts)
    assert [len(batch) for _, batch in service.embed_requests] == [100, 100, 50]
    assert [t for _, batch in service.embed_requests for t in batch] == texts
    np.testing.assert_array_equal(vectors, np.array([_vector(t) for t in texts], dtype=np.float32))


def test_long_texts_split_requests_by_the_token_budget():
    service = CountingBackend()
    texts = [f"{i} " + "x" * 30_000 for i in range(20)]  # about 30,000 tokens each by estimate
    vectors = BulkRunner(service, progress=False).embed(texts)
    for _, batch in service.embed_requests:
        assert sum(map(token_upper_bound, batch)) < MAX_TOKENS_PER_EMBEDDING_REQUEST
    assert len(service.embed_requests) == 4  # 6 + 6 + 6 + 2 texts
    assert vectors[:, 0].tolist() == [len(t) for t in texts]


def test_smaller_limits_are_honoured():
    service = CountingBackend()
    BulkRunner(service, progress=False, max_inputs=3).embed(_texts(7))
    assert [len(batch) for _, batch in service.embed_requests] == [3, 3, 1]


def test_repeated_texts_are_sent_once_and_every_row_gets_its_vector():
    service = CountingBackend()
    texts = ["b", "a", "b", "c", "a"]
    vectors = BulkRunner(service, progress=False).embed(texts)
    assert service.embed_requests == [(PASSAGE_MODEL, ["b", "a", "c"])]
    assert vectors[:, 1].tolist() == [ord(t) for t in texts]


def test_query_and_passage_vectors_are_kept_apart():
    service = CountingBackend()
    runner = BulkRunner(service, progress=False)
    runner.embed(["a"])
    runner.embed(["a"], model=QUERY_MODEL)
    assert [model for model, _ in service.embed_requests] == [PASSAGE_MODEL, QUERY_MODEL]


def test_a_series_embeds_to_a_frame_on_its_index():
    series = pd.Series(["x", "yy", "zzz"], index=[10, 20, 30])
    frame = BulkRunner(CountingBackend(), progress=False).embed_frame(series)
    assert list(frame.index) == [10, 20, 30]
    assert frame.shape == (3, 3)
    assert frame.loc[20, 0] == 2.0


def test_empty_or_missing_texts_are_refused_before_any_request_naming_the_rows():
    service = CountingBackend()
    series = pd.Series(["fine", None, ""], index=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"2 are not \(rows 'b', 'c'\)"):
        BulkRunner(service, progress=False).embed(series)
    assert service.embed_requests == []
    with pytest.raises(TypeError):
        BulkRunner(service, progress=False).embed("one string")


def test_no_texts_give_an_empty_array():
    assert BulkRunner(CountingBackend(), progress=False).embed([]).shape == (0, 0)


def test_a_refused_text_is_raised_and_the_texts_around_it_are_kept():
    service = CountingBackend()
    runner = BulkRunner(service, progress=False)
    texts = ["a", "b", "REFUSED", "d"]
    with pytest.raises(BadRequestError):
        runner.embed(texts)
    assert len(runner.store) == 2  # the first half; the refused text stopped the run
    service.embed_requests.clear()
    runner.embed(["a", "b", "d"])
    assert service.embed_requests == [(PASSAGE_MODEL, ["d"])]


# ---------------------------------------------------------------- interruption and resume


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, ConnectionError])
def test_an_interrupted_run_keeps_finished_requests_and_the_rerun_does_only_the_rest(interruption):
    service = CountingBackend(interrupt_at=3, interrupt_with=interruption)
    runner = BulkRunner(service, progress=False, max_inputs=10)
    texts = _texts(45)
    with pytest.raises(interruption):
        runner.embed(texts)
    assert len(runner.store) == 20  # two requests finished; the third was interrupted
    service.embed_requests.clear()
    vectors = runner.embed(texts)
    sent = [t for _, batch in service.embed_requests for t in batch]
    assert sent == texts[20:]  # nothing finished is asked again
    assert vectors[:, 0].tolist() == [len(t) for t in texts]


def test_a_store_on_disk_resumes_in_a_new_runner(tmp_path):
    path = tmp_path / "results.sqlite"
    texts = _texts(30)
    first = CountingBackend(interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        BulkRunner(first, ResultStore(path), progress=False, max_inputs=10).embed(texts)
    second = CountingBackend()
    vectors = BulkRunner(second, ResultStore(path), progress=False, max_inputs=10).embed(texts)
    assert [t for _, batch in second.embed_requests for t in batch] == texts[10:]
    assert vectors.shape == (30, 3)
    assert vectors.dtype == np.float32


# ---------------------------------------------------------------- groundedness


def _qa_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "context": [f"Fact {i} is true." for i in range(n)],
            "answer": [
                f"Fact {i} is true." if i % 2 == 0 else f"Fact {i} is false." for i in range(n)
            ],
        },
        index=[f"row{i}" for i in range(n)],
    )


def test_groundedness_over_a_frame_keeps_the_rows_order_and_index():
    service = CountingBackend()
    frame = _qa_frame(5)
    verdicts = BulkRunner(service, progress=False).check_groundedness(frame)
    assert verdicts.name == "verdict"
    assert list(verdicts.index) == list(frame.index)
    assert verdicts.tolist() == ["grounded", "notGrounded", "grounded", "notGrounded", "grounded"]
    request = service.chat_requests[0]
    assert request["model"] == "core-1-mini-groundedness-check"
    assert [m["role"] for m in request["messages"]] == ["user", "assistant"]


def test_groundedness_resumes_after_an_interruption_without_asking_again():
    service = CountingBackend(interrupt_at=4)
    runner = BulkRunner(service, progress=False)
    frame = _qa_frame(6)
    with pytest.raises(KeyboardInterrupt):
        runner.check_groundedness(frame)
    assert len(runner.store) == 3
    service.chat_requests.clear()
    verdicts = runner.check_groundedness(frame)
    assert [r["messages"][0]["content"] for r in service.chat_requests] == frame[
        "context"
    ].tolist()[3:]
    assert verdicts.tolist()[3:] == ["notGrounded", "grounded", "notGrounded"]


def test_groundedness_sends_a_repeated_pair_once_and_custom_columns_work():
    service = CountingBackend()
    frame = pd.DataFrame({"doc": ["A b.", "A b.", "C d."], "reply": ["A b.", "A b.", "x"]})
    verdicts = BulkRunner(service, progress=False).check_groundedness(
        frame, context="doc", answer="reply"
    )
    assert len(service.chat_requests) == 2
    assert verdicts.tolist() == ["grounded", "grounded", "notGrounded"]


def test_groundedness_refuses_missing_cells_before_any_request():
    service = CountingBackend()
    frame = pd.DataFrame({"context": ["a", None], "answer": ["a", "b"]})
    with pytest.raises(ValueError, match="column 'context'"):
        BulkRunner(service, progress=False).check_groundedness(frame)
    assert service.chat_requests == []


# ---------------------------------------------------------------- the real in-process path


def test_in_process_vectors_match_a_direct_request_row_for_row():
    service = InProcessBackend(
        chat_engine_instance=ScriptedChatEngine("yes"),
        embedding_engine_instance=CharCountEmbeddingEngine(),
    )
    texts = ["apple pie", "banana bread", "apple pie", "cherry tart"] * 30  # 120 texts, 3 distinct
    vectors = BulkRunner(service, progress=False, max_inputs=2).embed(texts)
    direct = service.embed({"model": PASSAGE_MODEL, "input": texts[:4]})
    expected = np.array([d.embedding for d in direct.data], dtype=np.float32)
    np.testing.assert_allclose(vectors, np.tile(expected, (30, 1)), rtol=1e-6)
    verdicts = BulkRunner(service, progress=False).check_groundedness(
        pd.DataFrame({"context": ["Sky is blue."], "answer": ["Sky is blue."]})
    )
    assert verdicts.tolist() == ["grounded"]


def test_the_progress_bar_counts_what_an_earlier_run_finished():
    bars = []

    class RecordingBar(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, file=io.StringIO(), **kwargs)
            bars.append(self)

    service = CountingBackend(interrupt_at=2)
    runner = BulkRunner(service, progress=RecordingBar, max_inputs=10)
    with pytest.raises(KeyboardInterrupt):
        runner.embed(_texts(30))
    runner.embed(_texts(30))
    assert [(bar.total, bar.initial, bar.n) for bar in bars] == [(30, 0, 10), (30, 10, 30)]


@pytest.mark.parametrize("in_file", [False, True])
def test_a_cleared_store_forgets_every_result(tmp_path, in_file):
    path = tmp_path / "results.sqlite" if in_file else None
    store = ResultStore(path)
    store.put_many({"a": b"1", "b": "2"})
    assert len(store) == 2
    store.clear()
    assert len(store) == 0 and store.get_many(["a", "b"]) == {}
    store.close()
    if in_file:
        reopened = ResultStore(path)
        assert len(reopened) == 0
        reopened.close()
