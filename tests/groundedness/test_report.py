"""The groundedness report offline: claims and chunks as ranges of their texts, and the report
built from the judge's readings (its verdict the plain check's, its offsets exact slices, the
corrected response holding what the context supports)."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.groundedness.calibration import JudgeCalibration
from backend.groundedness.claims import (
    chunk_context,
    chunk_pieces,
    claim_pieces,
    sentence_pieces,
    split_claims,
    split_sentences,
)
from backend.groundedness.judge import GroundednessJudge
from backend.groundedness.report import build_report, without_spans
from backend.testing import ScriptedChatEngine

BOTH = ("support", "contrast")
CALIBRATION = JudgeCalibration(0.7, 0.3, BOTH)


def squeezed(text: str) -> str:
    return "".join(text.split())


class WordsEngine(ScriptedChatEngine):
    """Says a claim is supported exactly when its words (or, in Korean and Japanese, its
    characters) all appear in the prompt's document."""

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        prompt = self.tokenizer.decode(prompt_ids)
        document, claim, question = re.findall(
            r"Document:\n(.*?)\n\nClaim: (.*?)\n\n(.*?\?)", prompt, re.S
        )[-1]
        units = set(re.findall(r"[a-z0-9]+|[^\W\da-z_]", claim.lower()))
        supported = units <= set(re.findall(r"[a-z0-9]+|[^\W\da-z_]", document.lower()))
        says_yes = supported if "supported" in question else not supported
        first = ord("y") if says_yes else ord("n")
        return [0.0 if c == first else math.log(1e-3) for c in candidate_ids]


def report_of(context, response, **judge_options):
    judge = GroundednessJudge(WordsEngine(), questions=BOTH, **judge_options)
    assessment, readings = judge.read(context, response)
    return assessment, build_report(context, response, assessment, readings, CALIBRATION)


def assert_exact_slices(context, response, report):
    for claim in report.claims:
        assert response[claim.start : claim.end] == claim.text
        for evidence in claim.evidence:
            assert context[evidence.start : evidence.end] == evidence.text


# ---------------------------------------------------------------- ranges


def test_claims_are_ranges_of_the_response_in_three_languages():
    response = (
        "직원은 18명이다. 내년에 공장을 열 계획이에요. 席数は24席である。うどんもある！ It is 5 m."
    )
    pieces = claim_pieces(response, 8)
    assert [p.text for p in pieces] == split_claims(response, 8)
    assert [response[p.start : p.end] for p in pieces] == [
        "직원은 18명이다.",
        "내년에 공장을 열 계획이에요.",
        "席数は24席である。",
        "うどんもある！",
        "It is 5 m.",
    ]


def test_merged_claims_span_their_sentences_with_the_text_between():
    response = "席数は24席である。うどんもある！\nYes. The answer is 42."
    pieces = claim_pieces(response, 1)
    (merged,) = pieces
    assert (merged.start, merged.end) == (0, len(response))
    # The judge reads the sentences joined by a space, as it always has.
    assert merged.text == "席数は24席である。 うどんもある！ Yes. The answer is 42."
    short_first = claim_pieces("Yes. The answer is 42.", 8)
    assert [(p.text, p.start, p.end) for p in short_first] == [("Yes. The answer is 42.", 0, 22)]


def test_chunks_are_ranges_of_the_context():
    paragraphs = [f"Paragraph {i} " + "word " * 20 for i in range(6)]
    text = "\n\n\n".join(p.strip() for p in paragraphs)  # three newlines: read as a blank line
    pieces = chunk_pieces(text, 60, lambda s: len(s.split()))
    assert [p.text for p in pieces] == chunk_context(text, 60, lambda s: len(s.split()))
    assert len(pieces) == 3
    assert [squeezed(text[p.start : p.end]) for p in pieces] == [squeezed(p.text) for p in pieces]
    assert pieces[0].start == 0 and pieces[-1].end == len(text)
    assert chunk_pieces("  short  ", 60, len) == [("  short  ", 0, 9)]


TEXTS = st.lists(
    st.sampled_from(
        [
            "a",
            "bb",
            "Dr.",
            "e.g.",
            " ",
            "  ",
            "\n",
            "\n\n",
            "\n \n",
            ".",
            "!",
            "?",
            "。",
            "！",
            "」",
            "다.",
            "요.",
            '"',
            ")",
            "Yes.",
            "1.",
            "word",
            "長い文",
            "A.",
            "\t",
            "席数",
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.sampled_from([1, 2, 8]), st.sampled_from([1, 3, 10]))
def test_every_piece_is_an_ordered_range_holding_what_the_judge_reads(text, claims, tokens):
    """Claims and chunks: ranges in order, not overlapping, trimmed, that hold exactly the
    non-space characters of the text the judge reads, and together all of the text's."""
    assert [p.text for p in sentence_pieces(text)] == split_sentences(text)
    words = lambda s: len(s.split())  # noqa: E731
    for pieces in (claim_pieces(text, claims), chunk_pieces(text, tokens, words)):
        ends = [0]
        for piece in pieces:
            assert ends[-1] <= piece.start <= piece.end <= len(text)
            assert squeezed(text[piece.start : piece.end]) == squeezed(piece.text)
            ends.append(piece.end)
        assert squeezed("".join(text[p.start : p.end] for p in pieces)) == squeezed(text)


# ---------------------------------------------------------------- the report

CONTEXT = "The tower is 330 m tall. It opened in 1889."


def test_the_report_keeps_the_supported_claims_and_says_where_everything_is():
    response = "The tower is 330 m tall.  It is blue.\nIt opened in 1889."
    assessment, report = report_of(CONTEXT, response)
    assert report.verdict == CALIBRATION.verdict(assessment.support) == "notGrounded"
    assert [c.verdict for c in report.claims] == ["grounded", "notGrounded", "grounded"]
    assert_exact_slices(CONTEXT, response, report)
    assert report.corrected_response == "The tower is 330 m tall.  It opened in 1889."
    assert report.claims[0].evidence[0].support > 0.99
    assert not any(c.decided_early for c in report.claims)


def test_korean_and_japanese_claims_are_cut_at_code_points():
    context = "직원은 18명이다. 席数は24席である。"
    response = "직원은 18명이다. 직원은 30명이다. 席数は24席である。"
    _, report = report_of(context, response)
    assert_exact_slices(context, response, report)
    assert [c.verdict for c in report.claims] == ["grounded", "notGrounded", "grounded"]
    assert report.corrected_response == "직원은 18명이다. 席数は24席である。"


FILLER = [f"Filler paragraph number {i} about topic {i}." for i in range(40)]
LONG_CONTEXT = "\n\n".join(FILLER[:5] + ["The ferry carries 196 passengers."] + FILLER[5:])


def test_a_long_contexts_evidence_is_each_claims_likeliest_chunks():
    response = "The ferry carries 196 passengers. The ferry carries 900 cars."
    _, report = report_of(LONG_CONTEXT, response, chunk_tokens=200, chunks_per_claim=2)
    assert_exact_slices(LONG_CONTEXT, response, report)
    supported, unsupported = report.claims
    assert "The ferry carries 196 passengers." in supported.evidence[0].text
    assert supported.evidence[0].start > 0  # not the first chunk: offsets count in the context
    assert len(unsupported.evidence) == 2 and unsupported.verdict == "notGrounded"
    assert report.corrected_response == "The ferry carries 196 passengers."


def test_claims_decided_without_every_chunk_say_so():
    response = "The ferry carries 196 passengers. The ferry carries 900 cars."
    options = {"chunk_tokens": 200, "chunks_per_claim": 2, "stop_at": CALIBRATION.thresholds}
    assessment, report = report_of(LONG_CONTEXT, response, **options)
    supported, unsupported = report.claims
    # Supported by its likeliest chunk: the second is left unread, the verdict final.
    assert supported.decided_early and supported.evidence[1].support is None
    assert supported.verdict == "grounded"
    assert not unsupported.decided_early  # read against both chunks before it decided
    _, everything = report_of(LONG_CONTEXT, response, chunk_tokens=200, chunks_per_claim=2)
    assert report.verdict == everything.verdict
    assert report.prompt_tokens < everything.prompt_tokens


def test_the_report_reads_what_the_plain_check_reads():
    judge = GroundednessJudge(WordsEngine(), questions=BOTH, stop_at=CALIBRATION.thresholds)
    response = "The tower is 330 m tall. It is blue."
    plain = judge.assess(CONTEXT, response)
    assessment, readings = judge.read(CONTEXT, response)
    report = build_report(CONTEXT, response, assessment, readings, CALIBRATION)
    assert report.prompt_tokens == plain.prompt_tokens
    assert report.verdict == CALIBRATION.verdict(plain.support)


def test_without_spans_keeps_the_rest_as_written():
    text = "A one. B two.\n\nC three."
    assert without_spans(text, [(7, 13)]) == "A one. C three."
    assert without_spans(text, [(15, 23)]) == "A one. B two."
    assert without_spans(text, [(0, 6), (15, 23)]) == "B two."
    assert without_spans(text, [(0, 6), (7, 13), (15, 23)]) == ""
    assert without_spans(text, []) == text
