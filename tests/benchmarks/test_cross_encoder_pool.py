"""What the cross-encoder candidate trains on (benchmarks/judge/cross_encoder_pool.py) and the
long-premise sources it may add (benchmarks/judge/datasets.py), read from ../shared/data/nli."""

from collections import Counter

from benchmarks.judge.cross_encoder_pool import first_chunks
from benchmarks.judge.datasets import Case, contrl, mctest, summac
from benchmarks.judge.wice_folds import claim_ids, oracle_chunks, training_cases


class WordTokenizer:
    """Counts words as tokens, as the e5 tokenizer's call is used: ``(text)["input_ids"]``."""

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": text.split()}


def test_long_premise_sources_keep_entailment_as_grounded_and_leave_polytope_out():
    control = contrl()
    assert len(control) == 799
    assert Counter((c.category, c.label) for c in control) == {
        ("e", 1): 286,
        ("c", 0): 276,
        ("n", 0): 237,
    }
    stories = mctest()
    assert len(stories) == 5760 and sum(c.label for c in stories) == 1440
    summaries = summac()
    assert {c.category for c in summaries} == {"factcc", "summeval", "xsumfaith"}
    assert (len(summaries), sum(c.label for c in summaries)) == (896, 387)


def test_a_long_premise_trains_on_the_chunk_the_judge_would_read_first():
    filler = "\n\n".join(f"Paragraph {n} talks about weather and rivers. " * 40 for n in range(4))
    document = filler + "\n\nThe lighthouse keeper painted the lighthouse red in 1902."
    long = Case("long", "test", "en", document, "The lighthouse was painted red in 1902.", 1)
    short = Case("short", "test", "en", "A short premise.", "A claim.", 0)
    read = first_chunks(WordTokenizer(), [long, short])
    assert "lighthouse keeper painted" in read[0].document
    assert len(read[0].document) < len(document)
    assert read[1] == short


def test_wice_folds_train_on_the_oracle_chunks_of_the_claims_named_only():
    ids, chunks = claim_ids(), oracle_chunks()
    assert len(ids) == 349 and set(ids) == set(chunks)
    cases = training_cases(ids[:3], chunks)
    assert len(cases) == sum(len(chunks[i]) for i in ids[:3])
    assert {c.id.rsplit("-", 1)[0] for c in cases} == {f"wice-oracle-{i}" for i in ids[:3]}
    assert all(
        c.label == int(label == "supported")
        for c, (_, _, label) in zip(
            cases, [chunk for i in ids[:3] for chunk in chunks[i]], strict=True
        )
    )
