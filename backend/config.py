"""Which models the in-process engine runs, from arguments or the environment.

Environment variables (arguments to ``connect`` / ``EngineConfig.from_env`` win):

* ``CORE_MODEL_PROFILE``: ``default`` (Qwen2.5-Coder-1.5B-Instruct) or ``small``
  (Qwen2.5-Coder-0.5B-Instruct, for tests and small machines).
* ``CORE_CHAT_MODEL``: a Hugging Face model id or local folder replacing the profile's chat
  model (it also judges groundedness).
* ``CORE_EMBEDDING_MODEL``: a Hugging Face id or folder replacing multilingual-e5-small.
* ``CORE_QUERY_PREFIX`` / ``CORE_PASSAGE_PREFIX``: prefixes for the query and passage models
  (default ``query: `` / ``passage: ``, as e5 expects).
* ``CORE_DEVICE``: ``cpu``, ``cuda``, ``cuda:1``...; default: the GPU when there is one.
* ``CORE_CHAT_ENGINE``: ``auto`` (default), ``llama.cpp`` or ``transformers``. ``auto`` runs the
  embedded GGUF models (and any ``.gguf`` file) with llama.cpp on a CPU, when llama-cpp-python
  is installed, and everything else (Hugging Face models, GPUs) with transformers.
* ``CORE_CHAT_THREADS``: CPU threads of the llama.cpp engine (default: all cores).
* ``CORE_CHAT_PARALLEL``: chat requests the llama.cpp engine decodes together (default 8).
* ``CORE_GROUNDEDNESS_ENGINE``: ``auto`` (default), ``chat`` or ``transformers``: what reads the
  groundedness judge's prompts. ``auto`` picks a bf16 transformers copy of the chat model when
  the chat model runs on llama.cpp on a CPU with AMX, which evaluates prompts about four times
  faster there (the judge only evaluates prompts); otherwise the chat engine itself.
* ``CORE_CHAT_DTYPE`` / ``CORE_EMBEDDING_DTYPE``: ``float32``, ``bfloat16``, ``float16`` or
  ``auto`` (default: bf16 where the hardware computes in it, else float32).
* ``CORE_CACHE_DIR``: where converted weights are kept (see ``backend.weights.cache``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from backend.embedding_service import EmbeddingPrefixes

PROFILE_CHAT_MODELS = {
    "default": "qwen2.5-coder-1.5b-instruct",
    "small": "qwen2.5-coder-0.5b-instruct",
}
DEFAULT_EMBEDDING_MODEL = "multilingual-e5-small"


@dataclass(frozen=True)
class JudgeCalibration:
    """How the groundedness judge reads one profile's model with one kind of reader.

    Calibrated on benchmarks/eval/groundedness.jsonl with ``python -m benchmarks.eval.
    calibrate`` (benchmarks/eval/calibration-<profile>-<reader>.json). The readers differ:
    llama.cpp reads the 4-bit GGUF weights, transformers the bf16 (or float32) ones, and their
    P(yes) shift a little, so each has its own thresholds.
    """

    #: Support at or above which a response is grounded, and below which it is not; between
    #: them the verdict is notSure.
    grounded_at: float
    not_grounded_below: float
    #: Whether the judge also asks the contrast question (``backend.groundedness.CONTRAST``);
    #: the thresholds were fitted with this choice and hold only with it.
    contrast: bool


GROUNDEDNESS_CALIBRATIONS = {
    # Balanced accuracy on the clear pairs at these thresholds (cross-validated in brackets).
    # Where no notSure band marks the ambiguous pairs the two thresholds are one cut
    # (``benchmarks.eval.calibrate.choose_thresholds``). The bf16 reader is picked on CPUs
    # with AMX and on GPUs and was calibrated on an AMX CPU before the contrast question was
    # added: it asks the support question alone until it is recalibrated on such a machine.
    #
    # 0.902 (0.903); notSure on 2.3% of the clear pairs and 12.5% of the ambiguous ones.
    ("default", "transformers"): JudgeCalibration(0.7174, 0.6863, contrast=False),
    # 0.929 (0.916); the support question alone scored 0.899 (0.885) in its calibration run.
    ("default", "llama.cpp"): JudgeCalibration(0.595, 0.595, contrast=True),
    # 0.745 (0.706): the 0.5B model cannot do much better.
    ("small", "transformers"): JudgeCalibration(0.5165, 0.5165, contrast=False),
    # 0.757 (0.729). The contrast question does not help the 0.5B model: 0.750 (0.716) with
    # it, at 2.9 s per short check instead of 1.0 s.
    ("small", "llama.cpp"): JudgeCalibration(0.5211, 0.5211, contrast=False),
}


def judge_calibration(profile: str, reader: str) -> JudgeCalibration:
    """The calibration of a profile's model read by ``reader`` (``llama.cpp`` or
    ``transformers``)."""
    return GROUNDEDNESS_CALIBRATIONS[(profile, reader)]


#: P(yes) below which a call that ``tool_choice: auto`` generated is dropped as unwanted, per
#: profile (``backend.call_check``); None: no check (the 0.5B model cannot tell).
PROFILE_TOOL_CALL_CHECK = {"default": 0.4, "small": None}
CHAT_ENGINES = ("auto", "llama.cpp", "transformers")
GROUNDEDNESS_ENGINES = ("auto", "chat", "transformers")


@dataclass(frozen=True)
class EngineConfig:
    profile: str = "default"
    chat_model: str = PROFILE_CHAT_MODELS["default"]
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    device: str | None = None
    chat_engine: str = "auto"
    groundedness_engine: str = "auto"
    chat_dtype: str | None = None
    embedding_dtype: str | None = None
    prefixes: EmbeddingPrefixes = field(default_factory=EmbeddingPrefixes)
    #: P(yes) at or above which a response is grounded, and below which it is not
    #: (see ``backend.groundedness``); in between the verdict is notSure. None: the pair
    #: calibrated for the profile and the reader actually loaded (``judge_calibration``).
    grounded_at: float | None = None
    not_grounded_below: float | None = None
    #: See ``PROFILE_TOOL_CALL_CHECK``.
    tool_call_check_below: float | None = None

    def __post_init__(self) -> None:
        if self.chat_engine not in CHAT_ENGINES:
            raise ValueError(
                f"unknown chat engine {self.chat_engine!r}; use one of: {', '.join(CHAT_ENGINES)}"
            )
        if self.groundedness_engine not in GROUNDEDNESS_ENGINES:
            raise ValueError(
                f"unknown groundedness engine {self.groundedness_engine!r}; use one of: "
                f"{', '.join(GROUNDEDNESS_ENGINES)}"
            )

    @classmethod
    def from_env(cls, **overrides: Any) -> EngineConfig:
        """Settings from the environment, then ``overrides`` (None values are ignored)."""
        env = os.environ
        profile = overrides.pop("profile", None) or env.get("CORE_MODEL_PROFILE") or "default"
        if profile not in PROFILE_CHAT_MODELS:
            raise ValueError(
                f"unknown model profile {profile!r}; use one of: {', '.join(PROFILE_CHAT_MODELS)}"
            )
        config = cls(
            profile=profile,
            chat_model=env.get("CORE_CHAT_MODEL") or PROFILE_CHAT_MODELS[profile],
            tool_call_check_below=PROFILE_TOOL_CALL_CHECK[profile],
            embedding_model=env.get("CORE_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_MODEL,
            device=env.get("CORE_DEVICE") or None,
            chat_engine=env.get("CORE_CHAT_ENGINE") or "auto",
            groundedness_engine=env.get("CORE_GROUNDEDNESS_ENGINE") or "auto",
            chat_dtype=env.get("CORE_CHAT_DTYPE") or None,
            embedding_dtype=env.get("CORE_EMBEDDING_DTYPE") or None,
            prefixes=EmbeddingPrefixes(
                query=env.get("CORE_QUERY_PREFIX", "query: "),
                passage=env.get("CORE_PASSAGE_PREFIX", "passage: "),
            ),
        )
        unknown = set(overrides) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown engine options: {', '.join(sorted(unknown))}")
        return replace(config, **{k: v for k, v in overrides.items() if v is not None})
