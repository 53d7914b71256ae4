"""The claim-by-claim groundedness judge and its text cutting, offline (no models)."""

import math
import re

import pytest

from backend.claims import chunk_context, rank_chunks, split_claims, split_sentences, terms
from backend.groundedness import GroundednessJudge
from tests.fakes import ScriptedChatEngine


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "The tower is 330 m tall. It opened in 1889!",
            ["The tower is 330 m tall.", "It opened in 1889!"],
        ),
        (
            "Revenue was 3.5 million. Dr. Tanaka led it.",
            ["Revenue was 3.5 million.", "Dr. Tanaka led it."],
        ),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        (
            "직원은 18명이다. 내년에 공장을 열 계획이에요. 정말요?",
            ["직원은 18명이다.", "내년에 공장을 열 계획이에요.", "정말요?"],
        ),
        (
            "席数は24席である。うどんもある！本当？",
            ["席数は24席である。", "うどんもある！", "本当？"],
        ),
        ("First line\nSecond line", ["First line", "Second line"]),
    ],
)
def test_sentences(text, sentences):
    assert split_sentences(text) == sentences


def test_short_fragments_join_a_neighbour():
    assert split_claims("Yes. The answer is 42. OK.", 8) == ["Yes. The answer is 42. OK."]


def test_claims_are_capped_by_merging_neighbours():
    claims = split_claims("Alpha is one. Beta is two. Gamma is three. Delta is four.", 2)
    assert claims == ["Alpha is one. Beta is two.", "Gamma is three. Delta is four."]


def test_chunks_follow_paragraphs_within_the_budget():
    paragraphs = [f"Paragraph {i} " + "word " * 20 for i in range(6)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    chunks = chunk_context(text, 60, lambda s: len(s.split()))
    assert len(chunks) == 3
    assert "\n\n".join(chunks) == text
    assert chunk_context("short text", 60, lambda s: len(s.split())) == ["short text"]


def test_a_long_paragraph_is_cut_between_sentences():
    paragraph = " ".join(f"Sentence {i} has five words." for i in range(10))
    chunks = chunk_context(paragraph, 12, lambda s: len(s.split()))
    assert len(chunks) == 5 and all(len(c.split()) <= 12 for c in chunks)


def test_terms_use_character_pairs_for_cjk():
    assert {"서울", "울은"} <= terms("서울은 크다")
    assert {"富士", "士山"} <= terms("富士山")
    assert "seoul" in terms("Seoul!")


def test_rank_chunks_prefers_rare_shared_terms():
    chunks = ["The river Danube flows east.", "The cat sleeps.", "Danube barges carry grain."]
    assert rank_chunks("Barges on the Danube carry grain", chunks)[0] == 2
    assert rank_chunks("nothing in common", chunks) == [0, 1, 2]


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
    judge = GroundednessJudge(DocumentEngine())
    context = "The tower is tall. The tower is old."
    supported = judge.judge(context, "The tower is tall. The tower is old.")
    assert supported.verdict == "grounded" and len(supported.claims) == 2
    mixed = judge.judge(context, "The tower is tall. The tower is blue.")
    assert mixed.verdict == "notGrounded"
    assert [round(s) for _, s in mixed.claims] == [1, 0]


def test_long_context_claims_find_their_chunk_at_bounded_cost():
    engine = DocumentEngine()
    filler = [f"Filler paragraph number {i} about topic {i}." for i in range(40)]
    context = "\n\n".join(filler[:5] + ["The ferry carries 196 passengers."] + filler[5:])
    judge = GroundednessJudge(engine, chunk_tokens=200, chunks_per_claim=2)
    judgement = judge.judge(
        context, "The ferry carries 196 passengers. Filler paragraph number 33 about topic 33."
    )
    assert judgement.verdict == "grounded"
    assert len(engine.prompts) == 16  # two claims, two chunks each, four readings each
    # No prompt holds the whole context: each holds one chunk (and the fixed instructions).
    assert max(len(prompt) for prompt in engine.prompts) < len(context)
    assert judgement.prompt_tokens == sum(len(prompt) for prompt in engine.prompts)


def test_thresholds_make_the_not_sure_band():
    with pytest.raises(ValueError):
        GroundednessJudge(DocumentEngine(), grounded_at=0.3, not_grounded_below=0.4)
    judge = GroundednessJudge(DocumentEngine(), grounded_at=0.6, not_grounded_below=0.4)
    assert judge._verdict(0.5) == "notSure"


@pytest.mark.parametrize(
    ("contrast", "support"), [(True, (0.9 + 0.9 + 0.4 + 0.4) / 4), (False, 0.9)]
)
def test_the_contrast_question_counts_by_its_p_no(contrast, support):
    """Each question is read alone and after the worked examples; the contrast question's
    "yes" speaks against the claim."""
    engine = LeaningEngine()
    judgement = GroundednessJudge(engine, contrast=contrast).judge("The sky is blue.", "Blue sky.")
    assert judgement.support == pytest.approx(support)
    questions = [asked(prompt) for prompt in engine.prompts]
    examples = ["The museum is closed on Mondays." in prompt for prompt in engine.prompts]
    if contrast:
        assert examples == [False, True, False, True]
        assert ["contradict" in q for q in questions] == [False, False, True, True]
    else:
        assert examples == [False, True]
