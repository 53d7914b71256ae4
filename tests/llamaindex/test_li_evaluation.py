"""``CoreGroundednessEvaluator`` offline: the request it sends and how verdicts score."""

from __future__ import annotations

import pytest
from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore, TextNode

from backend.chat.output import Finished, TextDelta
from backend.chat.responses import fold_completion
from llamaindex_core_ext import CoreGroundednessEvaluator
from llamaindex_core_ext.evaluation import evaluation_result

CONTEXTS = ["The lighthouse is green.", "It was built in 1873."]


def _completion(verdict: str):
    events = [TextDelta(verdict), Finished("stop", 1)]
    return fold_completion(events, completion_id="c", created=1, model="m", prompt_tokens=9)


@pytest.mark.parametrize(
    ("verdict", "passing", "score"),
    [("grounded", True, 1.0), ("notGrounded", False, 0.0), ("notSure", False, 0.5)],
)
def test_verdict_scores(verdict, passing, score):
    result = evaluation_result(_completion(verdict), "q", "r", CONTEXTS)
    assert (result.passing, result.score, result.feedback) == (passing, score, verdict)
    assert not result.invalid_result
    assert (result.query, result.response, result.contexts) == ("q", "r", CONTEXTS)


def test_unknown_verdict_is_an_invalid_result():
    result = evaluation_result(_completion("maybe"), None, "r", CONTEXTS)
    assert result.invalid_result and result.passing is None and result.score is None
    assert "maybe" in result.invalid_reason


@pytest.mark.parametrize(("reply", "verdict"), [("yes", "grounded"), ("no", "notGrounded")])
async def test_request_and_verdict(scripted, reply, verdict):
    # The scripted model answers the judge's yes/no question as its reply begins.
    backend = scripted(reply)
    evaluator = CoreGroundednessEvaluator(backend=backend)
    sync = evaluator.evaluate(query="Colour?", response="It is green.", contexts=CONTEXTS)
    async_ = await evaluator.aevaluate(query="Colour?", response="It is green.", contexts=CONTEXTS)
    assert sync.feedback == async_.feedback == verdict
    assert backend.requests[0] == {
        "model": "core-1-mini-groundedness-check",
        "messages": [
            {"role": "user", "content": "The lighthouse is green.\n\nIt was built in 1873."},
            {"role": "assistant", "content": "It is green."},
        ],
    }


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
