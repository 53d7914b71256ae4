"""The judge's learned reading, offline: its weights read what the fitted classifier reads,
they are stored and loaded intact, they refuse another model's hidden states, and the judge
takes each chunk's support from them (the same prompts, one reading each)."""

import math

import numpy as np
import pytest

from backend.groundedness.calibration import calibration_for
from backend.groundedness.judge import GroundednessJudge
from backend.groundedness.learned import LearnedReading, learned_reading_for
from benchmarks.judge.train import _pipeline, reading_from
from tests.groundedness.test_judge import DocumentEngine, last_pair


def test_the_shipped_weights_read_what_the_fitted_classifier_reads():
    rng = np.random.default_rng(0)
    hidden = rng.normal(3.0, 2.0, size=(200, 6))
    p_yes = rng.uniform(0.01, 0.99, size=200)
    labels = (hidden[:, 0] + np.log(p_yes / (1 - p_yes)) > 3.0).astype(int)
    features = np.column_stack([hidden, np.log(p_yes / (1 - p_yes))])
    model = _pipeline(0.3).fit(features, labels)
    reading = reading_from(model)
    expected = model.predict_proba(features)[:, 1]
    got = [reading.support(p, h) for p, h in zip(p_yes, hidden, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_weights_survive_saving_and_refuse_another_models_hidden_states(tmp_path):
    reading = LearnedReading(np.array([0.5, -1.0, 2.0]), 0.7, -0.2, 0.6, 0.4)
    reading.save(tmp_path / "r.npz")
    loaded = LearnedReading.load(tmp_path / "r.npz")
    hidden = np.array([1.0, 2.0, 0.25])
    assert loaded.support(0.8, hidden) == pytest.approx(reading.support(0.8, hidden), abs=1e-7)
    assert (loaded.grounded_at, loaded.not_grounded_below) == (0.6, 0.4)
    with pytest.raises(ValueError, match="trained on hidden states of 3 numbers, got 2"):
        loaded.support(0.5, np.zeros(2))


class HiddenDocumentEngine(DocumentEngine):
    """``DocumentEngine`` that also exposes a "hidden state": [1] where the claim's words
    all appear in the document, else [0]."""

    reads_hidden_states = True

    def next_token_readings_many(self, prompts, candidate_ids):
        readings = []
        for prompt in prompts:
            document, claim, _ = last_pair(self.tokenizer.decode(prompt))
            supported = set(claim.lower().split()) <= set(document.lower().split())
            readings.append(
                (self.next_token_logprobs(prompt, candidate_ids), np.array([float(supported)]))
            )
        return readings


def test_the_judge_takes_each_chunks_support_from_the_learned_reading():
    reading = LearnedReading(np.array([16.0]), -1.0, -8.0)
    judge = GroundednessJudge(HiddenDocumentEngine(), questions=("support",), learned=reading)
    assessment, readings = judge.read("the sky is blue", "the sky is blue")
    [only] = readings
    assert only.hidden.tolist() == [1.0] and only.p_yes["support"] > 0.9
    p = only.p_yes["support"]
    assert assessment.support == pytest.approx(
        1 / (1 + math.exp(-(16 - math.log(p / (1 - p)) - 8)))
    )
    unsupported = judge.assess("the sky is blue", "the sky is green")
    assert unsupported.support < 0.5 < assessment.support


def test_a_learned_reading_needs_hidden_states_and_the_support_question_alone():
    reading = LearnedReading(np.array([1.0]), 0.0, 0.0)
    with pytest.raises(ValueError, match="support question alone"):
        GroundednessJudge(
            HiddenDocumentEngine(), questions=("support", "contrast"), learned=reading
        )


def test_the_learned_calibration_is_used_only_where_hidden_states_are_read():
    learned = learned_reading_for("default", "llama.cpp")
    if learned is None:
        pytest.skip("no learned reading trained for the default profile")
    calibration = calibration_for("default", "llama.cpp")
    assert calibration.learned is learned
    assert calibration.thresholds == (learned.grounded_at, learned.not_grounded_below)
    assert calibration_for("default", "llama.cpp", reads_hidden_states=False).learned is None
