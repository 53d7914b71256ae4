"""The groundedness judge on offline engines: a response's support is its weakest claim's,
each claim read against the chunks that hold its evidence, its prompts sharing everything up
to the chunk; the calibration decides, and reading stops where its verdict is settled."""

import math
import re

import pytest

from backend.chat.yes_no import YesNoReader
from backend.groundedness.calibration import JudgeCalibration, calibration_for
from backend.groundedness.judge import GroundednessJudge
from backend.groundedness.prompts import INSTRUCTION, QUESTIONS, judge_prompt
from backend.testing import ScriptedChatEngine

BOTH = ("support", "contrast")


def last_pair(prompt: str) -> tuple[str, str, str]:
    """The document, claim and question of the prompt (the last, should it hold several)."""
    return re.findall(r"Document:\n(.*?)\n\nClaim: (.*?)\n\n(.*?\?)", prompt, re.S)[-1]


class DocumentEngine(ScriptedChatEngine):
    """Says the claim is supported (and not contradicted) exactly when its words all appear in
    the prompt's document; keeps every prompt it reads."""

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        self.prompts.append(list(prompt_ids))
        document, claim, question = last_pair(self.tokenizer.decode(prompt_ids))
        words = set(re.findall(r"\w+", claim.lower()))
        supported = words <= set(re.findall(r"\w+", document.lower()))
        says_yes = supported if "supported" in question else not supported
        first = ord("y") if says_yes else ord("n")
        return [0.0 if c == first else math.log(1e-3) for c in candidate_ids]


class LeaningEngine(ScriptedChatEngine):
    """Gives P(yes) 0.9 to the support question and 0.6 to the contrast question."""

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        _, _, question = last_pair(self.tokenizer.decode(prompt_ids))
        p_yes = 0.6 if question.startswith("Does the document contradict") else 0.9
        # The reader sums its yes and its no candidates (spellings, cases): one of each counts.
        weights = {ord("y"): p_yes, ord("n"): 1 - p_yes}
        return [math.log(weights.get(c, 1e-12)) for c in candidate_ids]


def test_every_claim_must_be_supported():
    judge = GroundednessJudge(DocumentEngine(), questions=BOTH)
    context = "The tower is tall. The tower is old."
    supported = judge.assess(context, "The tower is tall. The tower is old.")
    assert supported.support > 0.99 and len(supported.claims) == 2
    mixed = judge.assess(context, "The tower is tall. The tower is blue.")
    assert mixed.support < 0.01  # the weakest claim's
    assert [round(s) for _, s in mixed.claims] == [1, 0]


FILLER = [f"Filler paragraph number {i} about topic {i}." for i in range(40)]
LONG_CONTEXT = "\n\n".join(FILLER[:5] + ["The ferry carries 196 passengers."] + FILLER[5:])


def test_long_context_claims_find_their_chunk_at_bounded_cost():
    engine = DocumentEngine()
    judge = GroundednessJudge(engine, questions=BOTH, chunk_tokens=200, chunks_per_claim=2)
    judgement = judge.assess(
        LONG_CONTEXT, "The ferry carries 196 passengers. Filler paragraph number 33 about topic 33."
    )
    assert judgement.support > 0.99
    assert len(engine.prompts) == 8  # two claims, two chunks each, two questions each
    # No prompt holds the whole context: each holds one chunk (and the fixed instruction).
    assert max(len(prompt) for prompt in engine.prompts) < len(INSTRUCTION) + len(LONG_CONTEXT)
    assert judgement.prompt_tokens == sum(len(prompt) for prompt in engine.prompts)


def test_a_chunks_prompts_share_everything_up_to_the_end_of_the_chunk():
    """The claim and the question come after the chunk, so the engine evaluates the shared
    instruction and the chunk once for every claim and question asked of it."""
    reader = YesNoReader(ScriptedChatEngine())
    document = "The ferry carries 196 passengers and leaves at nine."
    prompts = [
        reader.prompt_ids(judge_prompt(document, claim, question))
        for claim in ("The ferry leaves at nine.", "It carries 196 passengers.")
        for question in QUESTIONS.values()
    ]
    text = ScriptedChatEngine().tokenizer.decode(prompts[0])
    chunk_end = text.index(document) + len(document)
    assert all(p[:chunk_end] == prompts[0][:chunk_end] for p in prompts)
    assert len({tuple(p[chunk_end:]) for p in prompts}) == len(prompts)
    assert text.startswith(f"system: {INSTRUCTION}")


def test_a_claim_supported_at_the_threshold_reads_no_second_chunk():
    engine = DocumentEngine()
    judge = GroundednessJudge(
        engine, questions=BOTH, stop_at=(0.7, 0.3), chunk_tokens=200, chunks_per_claim=2
    )
    judgement = judge.assess(LONG_CONTEXT, "The ferry carries 196 passengers.")
    assert judgement.support > 0.99
    assert len(engine.prompts) == 2  # its best chunk, both questions: settled
    without_stop = GroundednessJudge(
        DocumentEngine(), questions=BOTH, chunk_tokens=200, chunks_per_claim=2
    )
    assert without_stop.assess(LONG_CONTEXT, "The ferry carries 196 passengers.").support > 0.99


def test_a_claim_below_the_threshold_with_every_chunk_read_decides_the_response():
    engine = DocumentEngine()
    context = "The tower is tall."  # one chunk: every claim's chunks are read in one round
    judge = GroundednessJudge(engine, questions=BOTH, stop_at=(0.7, 0.3))
    judgement = judge.assess(context, "The tower is blue. The tower is tall.")
    assert judgement.support < 0.3
    long_judge = GroundednessJudge(
        DocumentEngine(), questions=BOTH, stop_at=(0.7, 0.3), chunk_tokens=200, chunks_per_claim=2
    )
    # The unsupported claim has two chunks: the second is read before the verdict is settled.
    response = "The ferry carries 900 cars. The ferry carries 196 passengers."
    settled = long_judge.assess(LONG_CONTEXT, response)
    everything = GroundednessJudge(
        DocumentEngine(), questions=BOTH, chunk_tokens=200, chunks_per_claim=2
    ).assess(LONG_CONTEXT, response)
    assert settled.support < 0.3 and everything.support < 0.3


@pytest.mark.parametrize(
    "response",
    [
        "The ferry carries 196 passengers. Filler paragraph number 33 about topic 33.",
        "The ferry carries 900 cars. Filler paragraph number 33 about topic 33.",
        "Filler paragraph number 2 about topic 2. The ferry is red.",
    ],
)
def test_stopping_early_gives_the_verdict_of_reading_everything(response):
    calibration = JudgeCalibration(0.7, 0.3, BOTH)
    options = {"questions": BOTH, "chunk_tokens": 200, "chunks_per_claim": 3}
    early_engine, full_engine = DocumentEngine(), DocumentEngine()
    early = GroundednessJudge(early_engine, stop_at=calibration.thresholds, **options)
    full = GroundednessJudge(full_engine, **options)
    assert calibration.verdict(early.assess(LONG_CONTEXT, response).support) == (
        calibration.verdict(full.assess(LONG_CONTEXT, response).support)
    )
    assert len(early_engine.prompts) < len(full_engine.prompts)


def test_the_readings_behind_an_assessment_are_kept_per_claim_and_chunk():
    judge = GroundednessJudge(LeaningEngine(), questions=BOTH)
    assessment, readings = judge.read("The sky is blue.", "Blue sky. Blue sea.")
    assert [(r.claim, r.chunk) for r in readings] == [(0, 0), (1, 0)]
    assert all(r.p_yes == pytest.approx({"support": 0.9, "contrast": 0.6}) for r in readings)
    assert len(assessment.claims) == 2


def test_thresholds_make_the_not_sure_band():
    with pytest.raises(ValueError):
        JudgeCalibration(grounded_at=0.3, not_grounded_below=0.4, questions=BOTH)
    calibration = JudgeCalibration(grounded_at=0.6, not_grounded_below=0.4, questions=BOTH)
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
    assert mine.questions == calibrated.questions


@pytest.mark.parametrize(("questions", "support"), [(BOTH, (0.9 + 0.4) / 2), (("support",), 0.9)])
def test_the_contrast_question_counts_by_its_p_no(questions, support):
    judgement = GroundednessJudge(LeaningEngine(), questions=questions).assess(
        "The sky is blue.", "Blue sky."
    )
    assert judgement.support == pytest.approx(support)


def test_unknown_or_no_questions_are_refused():
    for questions in ((), ("support", "vibes")):
        with pytest.raises(ValueError, match="questions must be some of"):
            GroundednessJudge(LeaningEngine(), questions=questions)


SPREAD_CONTEXT = "\n\n".join(
    FILLER[:5] + ["The ferry carries 196 passengers."] + FILLER[5:25] + ["It sails daily."]
)


def test_evidence_spread_over_chunks_is_read_together_as_sentences():
    """A claim whose evidence lies in two sentences chunks apart: no chunk holds all of it,
    the sentences assembled do; a context of one chunk is read the same either way."""
    claim = "The ferry carries 196 passengers daily."
    by_chunks = GroundednessJudge(DocumentEngine(), questions=BOTH, chunk_tokens=200)
    engine = DocumentEngine()
    by_sentences = GroundednessJudge(engine, questions=BOTH, chunk_tokens=200, evidence="sentences")
    assert by_chunks.assess(SPREAD_CONTEXT, claim).support < 0.01
    assert by_sentences.assess(SPREAD_CONTEXT, claim).support > 0.99
    document, _, _ = last_pair(engine.tokenizer.decode(engine.prompts[-1]))
    assert "196 passengers." in document and "sails daily." in document
    short = "The ferry carries 196 passengers. It sails daily."
    engines = DocumentEngine(), DocumentEngine()
    for engine, evidence in zip(engines, ("chunks", "sentences"), strict=True):
        GroundednessJudge(engine, questions=BOTH, evidence=evidence).assess(short, claim)
    assert engines[0].prompts == engines[1].prompts
    with pytest.raises(ValueError, match="evidence must be one of"):
        GroundednessJudge(DocumentEngine(), questions=BOTH, evidence="pages")
