"""Cutting a groundedness check into claims and chunks, and finding the chunks that hold a
claim's evidence, offline (no models)."""

import os
import subprocess
import sys

import pytest

from backend.groundedness.claims import (
    assemble_evidence,
    chunk_context,
    evidence_by_claim,
    rank_chunks,
    split_claims,
    split_sentences,
    terms,
)


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


TIE = """
from backend.groundedness.claims import rank_chunks
left, right = ["ka", "kb", "kc", "kd", "ke"], ["ra", "rb", "rc", "rd", "re"]
chunks = [" ".join(left), " ".join(right)]
chunks += [" ".join(left[extra:] + right[extra:]) for extra in range(1, 5)]
print(rank_chunks(" ".join(left + right), chunks)[:2])
"""


@pytest.mark.parametrize("seed", ["0", "10", "13"])
def test_equal_scores_rank_the_same_in_every_process(seed):
    """Chunks 0 and 1 match terms of the same frequencies: equal scores, so document order
    decides, whatever order Python's per-process string hashing gives the term sets (these
    seeds broke the tie the other way when scores were summed in set order)."""
    ran = subprocess.run(
        [sys.executable, "-c", TIE],
        env={**os.environ, "PYTHONHASHSEED": seed},
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.strip() == "[2, 0]"


def words(text: str) -> int:
    return len(text.split())


def test_assembled_evidence_keeps_the_likeliest_sentences_in_document_order():
    document = (
        "The bridge opened in 1932. Pigeons live under it. "
        "Its main span is 503 metres long. The weather was fine. The bridge is painted grey."
    )
    claim = "The bridge, painted grey, opened in 1932."
    evidence = assemble_evidence(document, claim, 10, words)
    assert evidence == "The bridge opened in 1932. The bridge is painted grey."
    # A sentence longer than the budget is still read, when it is the likeliest.
    long = "A very long sentence about the bridge and its many colours. Short one."
    assert assemble_evidence(long, "the bridge colours", 1, words) == long.split(". ")[0] + "."


def test_claims_with_the_same_evidence_share_one_piece():
    document = "The ferry carries 196 passengers. The museum opens at nine."
    claims = ["The ferry carries 196 passengers.", "The ferry has 196 passengers.", "Museum at 9."]
    pieces, order = evidence_by_claim(document, claims, 5, words)
    assert pieces == ["The ferry carries 196 passengers.", "The museum opens at nine."]
    assert order == [[0], [0], [1]]
