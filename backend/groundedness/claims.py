"""Cutting a groundedness check into pieces: the response into claims, the context into chunks.

The judge (``backend.groundedness.judge``) checks every claim of a response on its own against
the context chunks most likely to hold its evidence. Sentences stand in for claims; the
splitter knows English abbreviations and decimals, and the sentence ends of Korean and
Japanese (``다.``, ``요.``, ``。``, ``！``, ``？``). Chunks follow paragraph and sentence
boundaries. Which chunks hold a claim's evidence is guessed by weighted term overlap (words,
and character pairs for Hangul, kana and kanji, which are written without spaces between
words); the model then reads only those.

Claims and chunks are ``Piece``s: the text the judge reads and its range in the text it was
cut from, which the report (``backend.groundedness.report``) gives as offsets. The texts are
what they have always been (calibrations were fitted on them); on the measured sets they
differ from their ranges' text only in WiCE's long contexts, whose sentences a chunk joins
with a blank line (``python -m benchmarks.judge.report_check --spans``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import NamedTuple

# A sentence ends after . ! ? (and closing quotes or brackets) before white space, or right
# after the East Asian full stops and marks, with or without white space.
_SENTENCE_END = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))\s+|(?:(?<=[。！？．])|(?<=[。！？．][」』）]))\s*|\n+"
)
_ABBREVIATION = re.compile(
    r"(?:\b(?:Dr|Mr|Mrs|Ms|Prof|St|Jr|Sr|No|vs|etc|e\.g|i\.e|approx|Fig|Inc|Ltd|Co)|\b[A-Z])\.$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u9fff\uac00-\ud7af]")

#: Fragments with fewer word characters than this join the sentence before them.
MIN_CLAIM_CHARS = 4


class Piece(NamedTuple):
    """A claim or chunk: the text the judge reads and where it lies in the text it was cut
    from, as Python ``str`` indices (Unicode code points), ``end`` exclusive.

    ``source[start:end]`` is the piece as written there. ``text`` is what the judge reads:
    the same, except where the piece joins parts the splitter took apart (a merged claim's
    sentences are joined by one space, a chunk's paragraphs by a blank line; see
    ``read_text``), which is how the judge has always read them and what its calibrations
    were fitted on.
    """

    text: str
    start: int
    end: int


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` narrowed past the white space at either end of ``text[start:end]``
    (``str.strip``'s white space); an all-space range becomes empty at its start."""
    piece = text[start:end]
    left = len(piece) - len(piece.lstrip())
    if left == len(piece):
        return start, start
    return start + left, end - (len(piece) - len(piece.rstrip()))


def _between(text: str, separator: re.Pattern[str], start: int = 0, end: int | None = None):
    """The non-blank ranges of ``text[start:end]`` between ``separator``'s matches (what
    ``separator.split`` returns, as stripped ranges of ``text``)."""
    end = len(text) if end is None else end
    position = start
    for match in separator.finditer(text, start, end):
        yield _stripped(text, position, match.start())
        position = match.end()
    yield _stripped(text, position, end)


def sentence_pieces(text: str, start: int = 0, end: int | None = None) -> list[Piece]:
    """The sentences of ``text[start:end]`` in order, with their ranges in ``text``; an
    abbreviation's full stop does not end one (the pieces it joins read with one space)."""
    pieces: list[Piece] = []
    for left, right in _between(text, _SENTENCE_END, start, end):
        if left == right:
            continue
        piece = text[left:right]
        if pieces and _ABBREVIATION.search(pieces[-1].text):
            last = pieces[-1]
            pieces[-1] = Piece(f"{last.text} {piece}", last.start, right)
        else:
            pieces.append(Piece(piece, left, right))
    return pieces


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` in order; an abbreviation's full stop does not end one."""
    return [piece.text for piece in sentence_pieces(text)]


def _joined(first: Piece, second: Piece, separator: str = " ") -> Piece:
    return Piece(f"{first.text}{separator}{second.text}", first.start, second.end)


def claim_pieces(response: str, max_claims: int) -> list[Piece]:
    """The response's sentences, at most ``max_claims`` of them (neighbours are merged), with
    their ranges in ``response``.

    Fragments too short to claim anything ("Yes.", "1.") join the previous sentence, so that
    each claim can be checked on its own.
    """
    claims: list[Piece] = []
    pending: Piece | None = None  # a short fragment waiting for the sentence after it
    for sentence in sentence_pieces(response):
        if _word_chars(sentence.text) < MIN_CLAIM_CHARS:
            if claims:
                claims[-1] = _joined(claims[-1], sentence)
            else:
                pending = sentence if pending is None else _joined(pending, sentence)
            continue
        claims.append(sentence if pending is None else _joined(pending, sentence))
        pending = None
    if not claims:
        start, end = _stripped(response, 0, len(response))
        return [Piece(response[start:end], start, end)]
    while len(claims) > max_claims:  # bound the cost: merge the shortest neighbouring pair
        i = min(range(len(claims) - 1), key=lambda k: len(claims[k].text) + len(claims[k + 1].text))
        claims[i : i + 2] = [_joined(claims[i], claims[i + 1])]
    return claims


def split_claims(response: str, max_claims: int) -> list[str]:
    """The texts of ``claim_pieces``: what the judge reads of each claim."""
    return [piece.text for piece in claim_pieces(response, max_claims)]


def _word_chars(text: str) -> int:
    return sum(len(w) for w in _WORD.findall(text))


_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def chunk_pieces(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> list[Piece]:
    """Consecutive chunks of at most about ``max_tokens`` tokens, cut between paragraphs,
    else between sentences, with their ranges in ``text``; a single sentence longer than
    that is a chunk of its own. A context within the budget is one chunk, read whole."""
    if count_tokens(text) <= max_tokens:
        return [Piece(text, 0, len(text))]
    units: list[tuple[Piece, int]] = []
    for start, end in _between(text, _PARAGRAPH_BREAK):
        if start == end:
            continue
        paragraph = Piece(text[start:end], start, end)
        size = count_tokens(paragraph.text)
        if size <= max_tokens:
            units.append((paragraph, size))
        else:
            units.extend((s, count_tokens(s.text)) for s in sentence_pieces(text, start, end))
    chunks: list[Piece] = []
    current: Piece | None = None
    used = 0
    for unit, size in units:
        if current is not None and used + size > max_tokens:
            chunks.append(current)
            current, used = None, 0
        current = unit if current is None else _joined(current, unit, "\n\n")
        used += size
    if current is not None:
        chunks.append(current)
    return chunks


def chunk_context(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    """The texts of ``chunk_pieces``: what the judge reads of each chunk."""
    return [piece.text for piece in chunk_pieces(text, max_tokens, count_tokens)]


def terms(text: str) -> set[str]:
    """Lower-cased words, and character pairs inside runs of Hangul, kana or kanji."""
    found: set[str] = set()
    for word in _WORD.findall(text.casefold()):
        if _CJK.search(word):
            found.update(word[i : i + 2] for i in range(len(word) - 1))
            if len(word) == 1:
                found.add(word)
        else:
            found.add(word)
    return found


def rank_chunks(claim: str, chunks: Sequence[str]) -> list[int]:
    """Chunk indices, the likeliest holders of the claim's evidence first.

    Scores are the summed inverse chunk frequency of the claim's terms found in a chunk;
    ties keep document order. The sums are exact (``math.fsum``): summed in set order, which
    Python's per-process string hashing changes, equal scores could differ in their last bit
    and break a tie differently in every process.
    """
    chunk_terms = [terms(chunk) for chunk in chunks]
    frequency = Counter(t for found in chunk_terms for t in found)
    weight = {t: math.log(1 + len(chunks) / n) for t, n in frequency.items()}
    wanted = terms(claim)
    scores = [math.fsum(weight[t] for t in wanted & found) for found in chunk_terms]
    return sorted(range(len(chunks)), key=lambda i: (-scores[i], i))


def assemble_evidence(
    context: str, claim: str, max_tokens: int, count_tokens: Callable[[str], int]
) -> str:
    """The context's sentences likeliest to hold the claim's evidence (``rank_chunks`` over
    sentences), as many as fit in ``max_tokens`` tokens, in document order; at least the
    likeliest one, however long."""
    sentences = split_sentences(context)
    ranked = rank_chunks(claim, sentences)
    chosen, used = [], 0
    for index in ranked:
        size = count_tokens(sentences[index])
        if used + size <= max_tokens:
            chosen.append(index)
            used += size
    return " ".join(sentences[i] for i in sorted(chosen or ranked[:1])) or context


def evidence_by_claim(
    context: str, claims: Sequence[str], max_tokens: int, count_tokens: Callable[[str], int]
) -> tuple[list[str], list[list[int]]]:
    """Each claim's assembled evidence (``assemble_evidence``) as the pieces to read, and for
    each claim the index of its piece: claims with the same evidence share one piece."""
    pieces: list[str] = []
    order: list[list[int]] = []
    for claim in claims:
        evidence = assemble_evidence(context, claim, max_tokens, count_tokens)
        if evidence not in pieces:
            pieces.append(evidence)
        order.append([pieces.index(evidence)])
    return pieces, order
