"""Cutting a groundedness check into pieces: the response into claims, the context into chunks.

The judge (``backend.groundedness.judge``) checks every claim of a response on its own against
the context chunks most likely to hold its evidence. Sentences stand in for claims; the
splitter knows English abbreviations and decimals, and the sentence ends of Korean and
Japanese (``다.``, ``요.``, ``。``, ``！``, ``？``). Chunks follow paragraph and sentence
boundaries. Which chunks hold a claim's evidence is guessed by weighted term overlap (words,
and character pairs for Hangul, kana and kanji, which are written without spaces between
words); the model then reads only those.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

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


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` in order; an abbreviation's full stop does not end one."""
    pieces: list[str] = []
    for raw in _SENTENCE_END.split(text):
        piece = raw.strip()
        if not piece:
            continue
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    return pieces


def split_claims(response: str, max_claims: int) -> list[str]:
    """The response's sentences, at most ``max_claims`` of them (neighbours are merged).

    Fragments too short to claim anything ("Yes.", "1.") join the previous sentence, so that
    each claim can be checked on its own.
    """
    claims: list[str] = []
    pending = ""  # a short fragment waiting for the sentence after it
    for sentence in split_sentences(response):
        if _word_chars(sentence) < MIN_CLAIM_CHARS:
            if claims:
                claims[-1] = f"{claims[-1]} {sentence}"
            else:
                pending = f"{pending} {sentence}".strip()
            continue
        claims.append(f"{pending} {sentence}".strip())
        pending = ""
    if not claims:
        return [response.strip()]
    while len(claims) > max_claims:  # bound the cost: merge the shortest neighbouring pair
        i = min(range(len(claims) - 1), key=lambda k: len(claims[k]) + len(claims[k + 1]))
        claims[i : i + 2] = [f"{claims[i]} {claims[i + 1]}"]
    return claims


def _word_chars(text: str) -> int:
    return sum(len(w) for w in _WORD.findall(text))


def chunk_context(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    """Consecutive chunks of at most about ``max_tokens`` tokens, cut between paragraphs,
    else between sentences; a single sentence longer than that is a chunk of its own."""
    if count_tokens(text) <= max_tokens:
        return [text]
    units: list[tuple[str, int]] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        size = count_tokens(paragraph)
        if size <= max_tokens:
            units.append((paragraph, size))
        else:
            units.extend((s, count_tokens(s)) for s in split_sentences(paragraph))
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for unit, size in units:
        if current and used + size > max_tokens:
            chunks.append("\n\n".join(current))
            current, used = [], 0
        current.append(unit)
        used += size
    if current:
        chunks.append("\n\n".join(current))
    return chunks


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
