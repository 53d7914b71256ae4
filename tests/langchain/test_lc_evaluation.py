"""``CoreGroundednessEvaluator`` (LangSmith): feedback from the groundedness report, where it
finds a run's context and answer, and one round trip on the small model."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest
from langchain_core.documents import Document
from langsmith.evaluation import EvaluationResult, RunEvaluator
from langsmith.schemas import Example, Run

from backend.testing import EchoChatEngine, RecordingBackend, offline_backend
from langchain_core_ext import CoreGroundednessEvaluator
from langchain_core_ext.evaluation import context_of

CONTEXT = "The tower is tall. It opened in 1889."


def _evaluator(**fields) -> CoreGroundednessEvaluator:
    # The offline judge finds a claim supported exactly when its document holds it verbatim.
    return CoreGroundednessEvaluator(
        backend=RecordingBackend(offline_backend(EchoChatEngine())), **fields
    )


def _run(inputs: dict, outputs: dict) -> Run:
    run_id = uuid.uuid4()
    return Run(
        id=run_id,
        trace_id=run_id,
        name="rag",
        run_type="chain",
        start_time=datetime.now(timezone.utc),
        inputs=inputs,
        outputs=outputs,
    )


@pytest.mark.parametrize("use_async", [False, True])
async def test_unsupported_claims_are_the_comment(use_async):
    evaluator = _evaluator()
    answer = "The tower is tall. It is blue."
    if use_async:
        feedback = await evaluator.aevaluate_groundedness(CONTEXT, answer)
    else:
        feedback = evaluator.evaluate_groundedness(CONTEXT, answer)
    assert (feedback["key"], feedback["score"], feedback["value"]) == (
        "groundedness",
        0.0,
        "notGrounded",
    )
    assert feedback["comment"].startswith("notGrounded: 1 of 2 claims not supported")
    assert '"It is blue." (notGrounded, support 0.' in feedback["comment"]
    assert "The tower is tall." not in feedback["comment"]
    metadata = feedback["metadata"]
    assert metadata["unsupported_claims"] == ["It is blue."]
    assert metadata["corrected_response"] == "The tower is tall."
    assert 0 <= metadata["support"] < 0.5


def test_a_grounded_answer_scores_one():
    feedback = _evaluator(key="faithful").evaluate_groundedness(CONTEXT, "It opened in 1889.")
    assert (feedback["key"], feedback["score"], feedback["value"]) == ("faithful", 1.0, "grounded")
    assert feedback["comment"].startswith("grounded: all 1 claim supported by the context")
    assert feedback["metadata"]["unsupported_claims"] == []


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_run_with_retrieved_documents(use_async):
    evaluator = _evaluator()
    assert isinstance(evaluator, RunEvaluator) and evaluator.feedback_keys == ["groundedness"]
    docs = [
        Document(page_content="The tower is tall."),
        Document(page_content="It opened in 1889."),
    ]
    run = _run({"question": "Tell me"}, {"answer": "It opened in 1889.", "context": docs})
    result = await evaluator.aevaluate_run(run) if use_async else evaluator.evaluate_run(run)
    assert isinstance(result, EvaluationResult)
    assert (result.key, result.score, result.value) == ("groundedness", 1.0, "grounded")


def test_the_context_may_come_from_the_example_and_the_answer_from_output():
    evaluator = _evaluator(answer_key="output")
    run = _run({"question": "Tell me"}, {"output": "The tower is tall. It is blue."})
    example = Example(id=uuid.uuid4(), inputs={"question": "Tell me", "context": CONTEXT})
    result = evaluator.evaluate_run(run, example)
    assert (result.score, result.metadata["unsupported_claims"]) == (0.0, ["It is blue."])


def test_a_run_without_its_context_or_answer_is_refused():
    evaluator = _evaluator()
    with pytest.raises(KeyError, match="'context'"):
        evaluator.evaluate_run(_run({"q": "x"}, {"answer": "y"}))
    with pytest.raises(KeyError, match="'answer'"):
        evaluator.evaluate_run(_run({"context": "x"}, {"output": "y"}))


def test_context_forms():
    assert context_of("a text") == "a text"
    assert context_of([Document(page_content="a"), {"page_content": "b"}, "c"]) == ["a", "b", "c"]
    with pytest.raises(TypeError):
        context_of(3)


def test_the_small_model_names_what_the_context_does_not_hold(small_backend):
    evaluator = CoreGroundednessEvaluator(backend=small_backend)
    context = "The Eiffel Tower is 330 metres tall. It opened in 1889."
    answer = "The Eiffel Tower is 330 metres tall. It was painted blue in 2020."
    feedback = evaluator.evaluate_groundedness(context, answer)
    report = small_backend.check_groundedness_report(context, answer)
    assert feedback["value"] == report.verdict
    unsupported = [c.text for c in report.claims if c.verdict != "grounded"]
    assert feedback["metadata"]["unsupported_claims"] == unsupported
    assert all(f'"{text}"' in feedback["comment"] for text in unsupported)
