"""The judge's prompts, laid out so that what they share is one prefix.

Every prompt is one conversation: the fact checker's instruction (the same in every prompt of
every check, saying how to answer each question), then the document chunk, then the claim and
a short question. A chunk's prompts therefore differ only after the chunk: the engines
evaluate the instruction and the chunk once and the claims' and questions' ends together on
top of them (llama.cpp: sequences sharing the chunk's KV cells; transformers: one pass over
the prompts' token tree), and the instruction stays cached between checks. Before this layout
each question carried its own instruction and worked examples ahead of the document, so a
chunk was evaluated anew for every question and reading it was asked in.

The layout was chosen by cross-validation on the calibration sets' training folds against
variants that kept worked examples before the chunk or each question's full instruction after
the claim; none read better, and this one costs the fewest tokens per claim
(benchmarks/README.md has the figures).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    """One way of asking the model about a (document, claim) pair."""

    #: What calibrations call it (``calibration.JudgeCalibration.questions``).
    name: str
    #: Asked after the claim; ``INSTRUCTION`` says how to answer it.
    text: str
    #: Whether "yes" speaks for the claim (P(yes) is its support) or against it (P(no) is).
    yes_supports: bool


SUPPORT = Question("support", "Is the claim supported by the document?", yes_supports=True)
#: Asked alone it is no judge: the 1.5B model answers "yes" mostly when the claim agrees. But
#: that leaning to "yes" is shared with the support question for the same (document, claim),
#: so averaging in its P(no) can cancel part of it (contextual calibration); a calibration
#: asks it where that helped.
CONTRAST = Question("contrast", "Does the document contradict the claim?", yes_supports=False)
QUESTIONS = {question.name: question for question in (SUPPORT, CONTRAST)}

INSTRUCTION = (
    "You are a careful fact checker. Each message gives a document, a claim and a question "
    "about them. Judge by the document alone, not by what you know, and answer yes or no. "
    "Asked whether the claim is supported, answer yes only if everything the claim says is "
    "stated in the document or follows from it; answer no if the document contradicts any "
    "part of the claim or does not mention it. Asked whether the document contradicts the "
    "claim, answer yes if the document states something that conflicts with any part of the "
    "claim, such as a different number, date, name or place, or the opposite of what the "
    "claim says; answer no if the document agrees with the claim or does not mention it."
)


def asked(document: str, claim: str, question: Question) -> str:
    """The user turn asking ``question`` of the pair: the document first, so that prompts
    about the same document share everything up to its end."""
    return f"Document:\n{document}\n\nClaim: {claim}\n\n{question.text} Answer yes or no."


def judge_prompt(document: str, claim: str, question: Question) -> list[dict[str, str]]:
    """The conversation that asks ``question`` about (document, claim)."""
    return [
        {"role": "system", "content": INSTRUCTION},
        {"role": "user", "content": asked(document, claim, question)},
    ]
