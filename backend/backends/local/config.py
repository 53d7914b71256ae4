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
  groundedness judge's prompts. ``auto`` and ``chat`` read with the chat engine, on every CPU
  the same reader and the same verdicts; ``transformers`` loads a bf16 transformers copy of a
  chat model that runs on llama.cpp, an opt-in speed-up on CPUs with AMX that reads P(yes) at
  its own thresholds (``backend.engines.selection``; figures in benchmarks/README.md).
* ``CORE_JUDGE_MODEL``: a model that reads the groundedness judge's prompts instead of the chat
  model (a GPU user keeps a fast chat model and picks a strong judge): a Hugging Face id,
  folder, GGUF file or an embedded model's name. An embedded model brings its calibration;
  any other chat model needs ``grounded_at`` / ``not_grounded_below``
  (``benchmarks.eval.calibrate --judge-model`` finds them). It may also be an open
  fact-checker, read as its authors read it (``backend.engines.fact_checkers``): a
  sequence-classification one (MiniCheck-RoBERTa-L / -DeBERTa-L, an NLI model with an
  entailment label) or a T5 one (MiniCheck-Flan-T5-L), with its authors' cut of 0.5 unless
  thresholds are given; a model of another kind is refused, naming the kinds accepted.
* ``CORE_CHAT_DTYPE`` / ``CORE_EMBEDDING_DTYPE``: ``float32``, ``bfloat16``, ``float16`` or
  ``auto`` (default: bf16 where the hardware computes in it, else float32).
* ``CORE_CACHE_DIR``: where converted weights are kept (see ``backend.engines.weights.cache``;
  default ``~/.cache/core-textmodels``).
* ``CORE_DETERMINISTIC``: ``1`` decodes each chat request alone, so that none depends on
  another, at the cost of batching (default off; ``backend.engines.request_runner``).
* ``CORE_CUDA_GRAPHS``: ``1`` / ``0`` turns the transformers engine's slot runner on or off
  (default: on for a CUDA device, off elsewhere; ``backend.engines.transformers_chat``).
* ``CORE_SLOT_LENGTH``: tokens one generation holds in the slot runner's cache, which is then
  the engine's context length (default 4096).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from backend.chat.call_after_results import CALL_AFTER_RESULTS_FROM
from backend.chat.tool_need import TOOL_NEED_THRESHOLDS, ToolNeedThresholds
from backend.embeddings.windows import EmbeddingPrefixes
from backend.engines.judge_kinds import CHECKER_KINDS, known_judge_kind
from backend.engines.selection import CHAT_ENGINES, JUDGE_READERS

PROFILE_CHAT_MODELS = {
    "default": "qwen2.5-coder-1.5b-instruct",
    "small": "qwen2.5-coder-0.5b-instruct",
}
DEFAULT_EMBEDDING_MODEL = "multilingual-e5-small"


#: Where a ready engine object goes, for whoever passed one as the engine choice.
INJECTED_CHAT_ENGINE_HINT = (
    "; a ready engine object goes to InProcessBackend(chat_engine_instance=...)"
)


def _check_choice(name: str, value: object, accepted: tuple[str, ...], hint: str = "") -> None:
    """Refuse a choice that is not one of ``accepted`` (TypeError for a non-string, as an
    engine object passed where the choice goes), naming the accepted values."""
    if not isinstance(value, str):
        raise TypeError(
            f"{name} is one of {', '.join(accepted)}; got {type(value).__name__} {value!r}" + hint
        )
    if value not in accepted:
        what = name.replace("_", " ")
        raise ValueError(f"unknown {what} {value!r}; use one of: {', '.join(accepted)}")


UNCALIBRATED_JUDGE = (
    "the groundedness judge model {model!r} has no calibration: its thresholds hold only for "
    "the model they were fitted on. Pass grounded_at and not_grounded_below (CLI: "
    "--grounded-at/--not-grounded-below); to find them: "
    "python -m benchmarks.eval.calibrate --judge-model {model}. A fact-checker "
    "(sequence-classification or T5, such as MiniCheck) needs none: name its local folder or "
    "a model id already downloaded, whose configuration says what it is"
)


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
    #: Support at or above which a response is grounded, and below which it is not
    #: (``backend.groundedness.calibration``); in between the verdict is notSure. None: the
    #: thresholds calibrated for the profile and the reader actually loaded.
    grounded_at: float | None = None
    not_grounded_below: float | None = None
    #: See ``backend.chat.tool_need``; set from the profile by ``from_env``.
    tool_call_check_below: ToolNeedThresholds | None = None
    #: See ``backend.chat.call_after_results``; set from the profile by ``from_env``.
    call_after_results_from: float | None = None
    #: A model that reads the groundedness judge's prompts instead of the chat model (a Hugging
    #: Face id, local folder, GGUF file or embedded model name; a chat model or a fact-checker,
    #: ``backend.engines.judge_kinds``); None: the chat model.
    judge_model: str | None = None

    def __post_init__(self) -> None:
        _check_choice("chat_engine", self.chat_engine, CHAT_ENGINES, INJECTED_CHAT_ENGINE_HINT)
        _check_choice("groundedness_engine", self.groundedness_engine, JUDGE_READERS)
        if self.judge_model is not None and self.judge_profile is None:
            # Told from its files where they are here (a model of no accepted kind is refused
            # now); a fact-checker reads with its authors' cut, a chat model needs thresholds.
            kind = known_judge_kind(self.judge_model)
            no_thresholds = self.grounded_at is None and self.not_grounded_below is None
            if kind not in CHECKER_KINDS and no_thresholds:
                raise ValueError(UNCALIBRATED_JUDGE.format(model=self.judge_model))

    @property
    def judge_profile(self) -> str | None:
        """Whose calibration the judge's readings take: the profile's, or for a judge model
        the embedded profile that runs that model (None for a model of the user's own, which
        needs its own thresholds)."""
        if self.judge_model is None or self.judge_model == self.chat_model:
            return self.profile
        by_model = {model: profile for profile, model in PROFILE_CHAT_MODELS.items()}
        return by_model.get(self.judge_model)

    @classmethod
    def from_env(cls, **overrides: Any) -> EngineConfig:
        """Settings from the environment, then ``overrides`` (None values are ignored)."""
        env = os.environ
        profile = overrides.pop("profile", None) or env.get("CORE_MODEL_PROFILE") or "default"
        if profile not in PROFILE_CHAT_MODELS:
            raise ValueError(
                f"unknown model profile {profile!r}; use one of: {', '.join(PROFILE_CHAT_MODELS)}"
            )
        values = dict(
            profile=profile,
            chat_model=env.get("CORE_CHAT_MODEL") or PROFILE_CHAT_MODELS[profile],
            tool_call_check_below=TOOL_NEED_THRESHOLDS[profile],
            call_after_results_from=CALL_AFTER_RESULTS_FROM[profile],
            embedding_model=env.get("CORE_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_MODEL,
            device=env.get("CORE_DEVICE") or None,
            chat_engine=env.get("CORE_CHAT_ENGINE") or "auto",
            groundedness_engine=env.get("CORE_GROUNDEDNESS_ENGINE") or "auto",
            chat_dtype=env.get("CORE_CHAT_DTYPE") or None,
            judge_model=env.get("CORE_JUDGE_MODEL") or None,
            embedding_dtype=env.get("CORE_EMBEDDING_DTYPE") or None,
            prefixes=EmbeddingPrefixes(
                query=env.get("CORE_QUERY_PREFIX", "query: "),
                passage=env.get("CORE_PASSAGE_PREFIX", "passage: "),
            ),
        )
        unknown = set(overrides) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(
                f"unknown engine options: {', '.join(sorted(unknown))}; the options are "
                f"{', '.join(cls.__dataclass_fields__)} (ready engine objects go to "
                "InProcessBackend(chat_engine_instance=..., embedding_engine_instance=...))"
            )
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
