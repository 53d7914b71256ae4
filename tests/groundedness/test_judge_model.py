"""A judge model of the user's choice (``CORE_JUDGE_MODEL``, ``judge_model=``): it reads the
judge's prompts instead of the chat model, with its own calibration, and one of the user's
own is refused until it has thresholds. The embedded models stand in for both."""

from __future__ import annotations

import os

import pytest

from backend import ConnectionSettings
from backend.backends.local import InProcessBackend
from backend.backends.local.config import PROFILE_CHAT_MODELS, EngineConfig
from backend.groundedness.calibration import calibration_for, own_thresholds
from backend.protocol.catalogue import GROUNDEDNESS_MODEL

DEFAULT_MODEL = PROFILE_CHAT_MODELS["default"]
CHECK = [
    {"role": "user", "content": "The museum opens at 9:00 on weekdays and is closed on Monday."},
    {"role": "assistant", "content": "The museum is open on Mondays."},
]


def test_a_judge_model_of_the_users_own_needs_thresholds_and_says_how_to_find_them():
    with pytest.raises(ValueError) as caught:
        EngineConfig.from_env(judge_model="my-org/judge-7b")
    message = str(caught.value)
    assert "'my-org/judge-7b' has no calibration" in message and "grounded_at" in message
    assert "python -m benchmarks.eval.calibrate --judge-model my-org/judge-7b" in message
    config = EngineConfig.from_env(judge_model="my-org/judge-7b", grounded_at=0.6)
    assert config.judge_profile is None and config.grounded_at == 0.6


def test_the_judge_model_comes_from_the_environment_and_brings_its_profiles_calibration(
    monkeypatch,
):
    monkeypatch.setenv("CORE_JUDGE_MODEL", DEFAULT_MODEL)
    config = EngineConfig.from_env(profile="small")
    assert (config.judge_model, config.judge_profile) == (DEFAULT_MODEL, "default")
    assert EngineConfig.from_env(judge_model=PROFILE_CHAT_MODELS["small"]).judge_profile == "small"
    settings = ConnectionSettings(judge_model=DEFAULT_MODEL)
    assert settings.judge_model == DEFAULT_MODEL


def test_the_users_own_thresholds_make_a_p_yes_calibration():
    assert own_thresholds(0.7, 0.4).thresholds == (0.7, 0.4)
    assert own_thresholds(0.7, None).thresholds == (0.7, 0.7)
    assert own_thresholds(None, 0.4).thresholds == (0.4, 0.4)
    assert own_thresholds(0.7, 0.4).learned is None
    with pytest.raises(ValueError, match="give grounded_at"):
        own_thresholds(None, None)


@pytest.mark.model
def test_a_judge_model_reads_what_its_own_profile_reads():
    """The small profile's chat model beside the default model as its judge gives the
    default profile's verdict and support, bit for bit (each check laid out alone)."""
    from backend.engines.weights.embedded_chat import DEFAULT, EmbeddedWeightsError, part_paths

    try:
        part_paths(DEFAULT)
    except EmbeddedWeightsError as error:
        pytest.skip(f"the default profile's chat model is not installed: {error}")
    device = os.environ.get("CORE_TEST_DEVICE")
    judged = InProcessBackend(profile="small", judge_model=DEFAULT_MODEL, device=device)
    reference = InProcessBackend(profile="default", device=device)
    try:
        assert judged.judge_reader().engine is not judged._chat.get()
        assert judged.judge_calibration().thresholds == reference.judge_calibration().thresholds
        reader = reference.judge_reader().kind
        assert (
            judged.judge_calibration().thresholds == calibration_for("default", reader).thresholds
        )
        request = {"model": GROUNDEDNESS_MODEL, "messages": CHECK}
        mine = judged._groundedness_service.get().judge_request(_parsed(request))
        theirs = reference._groundedness_service.get().judge_request(_parsed(request))
        assert mine == theirs
    finally:
        judged.close()
        reference.close()


def _parsed(request):
    from backend.protocol.schemas import ChatCompletionRequest
    from backend.protocol.validation import parse_request

    return parse_request(ChatCompletionRequest, request)
