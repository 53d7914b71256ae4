"""The fact-by-fact variant's reading of the model's list (benchmarks/judge/variants.py)."""

from benchmarks.judge.variants import MAX_FACTS, facts_of


def test_facts_are_the_listed_lines_without_bullets_repeats_or_a_claim_of_the_models_own():
    answer = (
        "- The album was produced by Rick Rubin.\n"
        "* The album was released in 2010.\n\n"
        "The album was produced by Rick Rubin.\n"
        "Claim: The band toured Europe.\n"
        "The band toured Europe."
    )
    assert facts_of(answer) == [
        "The album was produced by Rick Rubin.",
        "The album was released in 2010.",
    ]
    many = "\n".join(f"Fact number {n}." for n in range(10))
    assert len(facts_of(many)) == MAX_FACTS
