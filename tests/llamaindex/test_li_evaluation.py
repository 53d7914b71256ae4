"""``CoreGroundednessEvaluator`` offline: the request it sends, how verdicts score and the
unsupported claims it names; and one round trip on the small model."""

from __future__ import annotations

import pytest
from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore, TextNode

from backend.protocol.groundedness_report import GroundednessReport
from backend.testing import EchoChatEngine, offline_backend
from llamaindex_core_ext import CoreGroundednessEvaluator
from llamaindex_core_ext.evaluation import evaluation_result
from tests.hand_made_reports import hand_made_report

CONTEXTS = ["The lighthouse is green.", "It was built in 1873."]


def _report(verdict: str, support: float) -> GroundednessReport:
    claim = {"text": "r", "start": 0, "end": 1, "verdict": verdict, "support": support}
    return hand_made_report(
        [{**claim, "evidence": [], "decided_early": False}],
        verdict,
        support,
        corrected_response="r" if verdict == "grounded" else "",
    )


@pytest.mark.parametrize(
    ("verdict", "support", "passing", "score", "feedback"),
    [
        (
            "grounded",
            0.9,
            True,
            1.0,
            "grounded: all 1 claim supported by the context (weakest support 0.90)",
        ),
        (
            "notGrounded",
            0.1,
            False,
            0.0,
            "notGrounded: 1 of 1 claim not supported by the "
            'context: "r" (notGrounded, support 0.10)',
        ),
        (
            "notSure",
            0.5,
            False,
            0.5,
            'notSure: 1 of 1 claim not supported by the context: "r" (notSure, support 0.50)',
        ),
    ],
)
def test_verdict_scores(verdict, support, passing, score, feedback):
    result = evaluation_result(_report(verdict, support), "q", "r", CONTEXTS)
    assert (result.passing, result.score, result.feedback) == (passing, score, feedback)
    assert not result.invalid_result
    assert (result.query, result.response, result.contexts) == ("q", "r", CONTEXTS)


@pytest.mark.parametrize(("reply", "verdict"), [("yes", "grounded"), ("no", "notGrounded")])
async def test_request_and_verdict(scripted, reply, verdict):
    # The scripted model answers the judge's yes/no question as its reply begins.
    backend = scripted(reply)
    evaluator = CoreGroundednessEvaluator(backend=backend)
    sync = evaluator.evaluate(query="Colour?", response="It is green.", contexts=CONTEXTS)
    async_ = await evaluator.aevaluate(query="Colour?", response="It is green.", contexts=CONTEXTS)
    assert sync.feedback == async_.feedback
    assert sync.feedback.startswith(f"{verdict}: ")
    assert sync.passing == (verdict == "grounded")
    # The report of the spec's check, on the contexts joined by a blank line.
    assert backend.requests[0] == {
        "model": "core-1-mini-groundedness-check",
        "messages": [
            {"role": "user", "content": "The lighthouse is green.\n\nIt was built in 1873."},
            {"role": "assistant", "content": "It is green."},
        ],
        "core_report": True,
    }


@pytest.mark.parametrize("use_async", [False, True])
async def test_feedback_names_the_claims_the_contexts_do_not_support(use_async):
    # The offline judge finds a claim supported exactly when its document holds it verbatim.
    evaluator = CoreGroundednessEvaluator(backend=offline_backend(EchoChatEngine()))
    args = {"response": "The lighthouse is green. It is made of glass.", "contexts": CONTEXTS}
    result = await evaluator.aevaluate(**args) if use_async else evaluator.evaluate(**args)
    assert (result.passing, result.score) == (False, 0.0)
    assert result.feedback.startswith("notGrounded: 1 of 2 claims not supported by the context:")
    assert '"It is made of glass." (notGrounded' in result.feedback
    assert "The lighthouse is green." not in result.feedback


def test_the_small_model_names_what_the_contexts_do_not_hold(small_backend):
    contexts = ["The Eiffel Tower is 330 metres tall.", "It opened in 1889."]
    response = "The Eiffel Tower is 330 metres tall. It was painted blue in 2020."
    result = CoreGroundednessEvaluator(backend=small_backend).evaluate(
        response=response, contexts=contexts
    )
    report = small_backend.check_groundedness_report(contexts, response)
    assert result.feedback.startswith(f"{report.verdict}: ")
    assert result.passing == (report.verdict == "grounded")
    for claim in report.claims:
        assert (f'"{claim.text}"' in result.feedback) == (claim.verdict != "grounded")


async def test_query_engine_response_with_source_nodes(scripted):
    backend = scripted("yes")
    response = Response(
        response="It is green.",
        source_nodes=[NodeWithScore(node=TextNode(text=text), score=0.9) for text in CONTEXTS],
    )
    evaluator = CoreGroundednessEvaluator(backend=backend)
    result = evaluator.evaluate_response(query="Colour?", response=response)
    assert result.passing and result.score == 1.0 and result.contexts == CONTEXTS
    assert (await evaluator.aevaluate_response(response=response)).passing
    assert backend.requests[0]["messages"][0]["content"] == "\n\n".join(CONTEXTS)


@pytest.mark.parametrize(
    ("response", "contexts", "error"),
    [
        (None, CONTEXTS, "response"),
        ("", CONTEXTS, "response"),
        ("r", None, "context"),
        ("r", ["", ""], "context"),
    ],
)
async def test_missing_inputs_are_refused(scripted, response, contexts, error):
    backend = scripted("yes")
    with pytest.raises(ValueError, match=error):
        await CoreGroundednessEvaluator(backend=backend).aevaluate(
            response=response, contexts=contexts
        )
    assert backend.requests == []


def test_no_prompts_to_change():
    evaluator = CoreGroundednessEvaluator()
    assert evaluator.get_prompts() == {}
    with pytest.raises(ValueError):
        evaluator.update_prompts({"x": None})
