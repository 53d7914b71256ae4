"""The groundedness judge on offline engines: a response's support is its weakest claim's,
each claim read against the chunks that hold its evidence; the calibration decides."""

import math
import re

import pytest

from backend.groundedness.calibration import JudgeCalibration, calibration_for
from backend.groundedness.judge import GroundednessJudge
from backend.testing import ScriptedChatEngine


class DocumentEngine(ScriptedChatEngine):
    """Says the claim is supported (and not contradicted) exactly when its words all appear in
    the prompt's document."""

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        prompt = self.tokenizer.decode(prompt_ids)
        self.prompts.append(list(prompt_ids))
        # The pair asked about is the last in the prompt (worked examples come before it).
        pairs = re.findall(r"Document:\n(.*?)\n\nClaim: (.*?)\n\n(.*?\?)", prompt, re.S)
        document, claim, question = pairs[-1]
        words = set(re.findall(r"\w+", claim.lower()))
        supported = words <= set(re.findall(r"\w+", document.lower()))
        says_yes = supported if "supported" in question else not supported
        first = ord("y") if says_yes else ord("n")
        return [0.0 if c == first else math.log(1e-3) for c in candidate_ids]


def asked(prompt: str) -> str:
    """The last question in a prompt (the fakes' template ends on "question\nassistant: ")."""
    return re.findall(r"[^\n]*\?", prompt)[-1]


class LeaningEngine(ScriptedChatEngine):
    """Gives P(yes) 0.9 to the support question and 0.6 to the contrast question."""

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        prompt = self.tokenizer.decode(prompt_ids)
        self.prompts.append(prompt)
        p_yes = 0.6 if asked(prompt).endswith("contradict the claim?") else 0.9
        # The reader sums its yes and its no candidates (spellings, cases): one of each counts.
        weights = {ord("y"): p_yes, ord("n"): 1 - p_yes}
        return [math.log(weights.get(c, 1e-12)) for c in candidate_ids]


def test_every_claim_must_be_supported():
    judge = GroundednessJudge(DocumentEngine(), contrast=True)
    context = "The tower is tall. The tower is old."
    supported = judge.assess(context, "The tower is tall. The tower is old.")
    assert supported.support > 0.99 and len(supported.claims) == 2
    mixed = judge.assess(context, "The tower is tall. The tower is blue.")
    assert mixed.support < 0.01  # the weakest claim's
    assert [round(s) for _, s in mixed.claims] == [1, 0]


def test_long_context_claims_find_their_chunk_at_bounded_cost():
    engine = DocumentEngine()
    filler = [f"Filler paragraph number {i} about topic {i}." for i in range(40)]
    context = "\n\n".join(filler[:5] + ["The ferry carries 196 passengers."] + filler[5:])
    judge = GroundednessJudge(engine, contrast=True, chunk_tokens=200, chunks_per_claim=2)
    judgement = judge.assess(
        context, "The ferry carries 196 passengers. Filler paragraph number 33 about topic 33."
    )
    assert judgement.support > 0.99
    assert len(engine.prompts) == 16  # two claims, two chunks each, four readings each
    # No prompt holds the whole context: each holds one chunk (and the fixed instructions).
    assert max(len(prompt) for prompt in engine.prompts) < len(context)
    assert judgement.prompt_tokens == sum(len(prompt) for prompt in engine.prompts)


def test_thresholds_make_the_not_sure_band():
    with pytest.raises(ValueError):
        JudgeCalibration(grounded_at=0.3, not_grounded_below=0.4, contrast=True)
    calibration = JudgeCalibration(grounded_at=0.6, not_grounded_below=0.4, contrast=True)
    assert [calibration.verdict(s) for s in (0.6, 0.5, 0.4, 0.39)] == [
        "grounded",
        "notSure",
        "notSure",
        "notGrounded",
    ]


def test_configured_thresholds_replace_the_calibrated_ones_and_keep_the_questions():
    calibrated = calibration_for("default", "llama.cpp")
    mine = calibration_for("default", "llama.cpp", grounded_at=0.8, not_grounded_below=0.7)
    assert (mine.grounded_at, mine.not_grounded_below) == (0.8, 0.7)
    assert mine.contrast == calibrated.contrast


@pytest.mark.parametrize(
    ("contrast", "support"), [(True, (0.9 + 0.9 + 0.4 + 0.4) / 4), (False, 0.9)]
)
def test_the_contrast_question_counts_by_its_p_no(contrast, support):
    """Each question is read alone and after the worked examples; the contrast question's
    "yes" speaks against the claim."""
    engine = LeaningEngine()
    judgement = GroundednessJudge(engine, contrast=contrast).assess("The sky is blue.", "Blue sky.")
    assert judgement.support == pytest.approx(support)
    questions = [asked(prompt) for prompt in engine.prompts]
    examples = ["The museum is closed on Mondays." in prompt for prompt in engine.prompts]
    if contrast:
        assert examples == [False, True, False, True]
        assert ["contradict" in q for q in questions] == [False, False, True, True]
    else:
        assert examples == [False, True]
