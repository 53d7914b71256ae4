"""Reproducible benchmark inputs: mixed-length texts and chat prompts from a fixed seed."""

from __future__ import annotations

import random

# A fixed vocabulary (English, with some Korean and Japanese) so the inputs never change.
_WORDS = (
    "the of and to in is was for on that with as by at from this are be or an which have it "
    "not were has their more one all can also its been other new first after two some time "
    "city river market school model data energy water music history science garden railway "
    "library museum festival harbour mountain village engine network system policy report "
    "weather forecast customer invoice payment balance account transfer contract meeting "
    "project deadline budget review design language translation question answer evidence "
    "context summary document passage query search index vector retrieval ranking result "
    "protein enzyme climate ocean forest island bridge tunnel airport station ticket journey "
    "서울 부산 날씨 회의 보고서 계약 도서관 박물관 기차 버스 학교 시장 "
    "東京 大阪 天気 会議 報告書 契約 図書館 博物館 電車 学校 市場 "
    "quickly carefully often rarely always never usually recently finally together"
).split()


def mixed_texts(
    count: int = 512, shortest: int = 10, longest: int = 250, seed: int = 0
) -> list[str]:
    """``count`` texts of ``shortest`` to ``longest`` words (uniform), from a fixed seed."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        words = rng.choices(_WORDS, k=rng.randint(shortest, longest))
        texts.append(" ".join(words).capitalize() + ".")
    return texts


def short_requests(clients: int, seed: int = 1) -> list[list[str]]:
    """One request per client: 1 to 8 short texts (3 to 20 words) each."""
    rng = random.Random(seed)
    return [
        mixed_texts(rng.randint(1, 8), 3, 20, seed=rng.randrange(10**6)) for _ in range(clients)
    ]


def chat_prompt(variant: int, words: int = 140) -> str:
    """A user message of about 200 tokens that asks for a long answer; ``variant`` changes it.

    Each repetition uses another variant so no engine can answer from a cached prompt.
    """
    body = " ".join(random.Random(1000 + variant).choices(_WORDS[:150], k=words))
    return (
        f"Here are some notes (set {variant}): {body}.\n"
        "Write a long, detailed story inspired by these notes, in plain English."
    )
