"""What kind of model a user named as the groundedness judge, from its configuration alone
(no weights read, no torch imported): the in-process backend asks at construction, the loader
at load.

* ``causal``: a chat model (``...ForCausalLM``), read by P(yes) of its answer to the judge's
  prompts (``backend.chat.yes_no``), as the embedded models are;
* ``classifier``: a sequence-classification fact-checker (``...ForSequenceClassification``):
  MiniCheck-RoBERTa-L / -DeBERTa-L (two labels, the second "supported"), or an NLI model
  whose labels name entailment;
* ``seq2seq``: a T5 fact-checker read as MiniCheck-Flan-T5-L is (``T5ForConditionalGeneration``).

How the two checker kinds are fed is in ``backend.engines.fact_checkers``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

JUDGE_KINDS = {
    "causal": "a causal chat model (*ForCausalLM), read by P(yes) of its answer to the judge's "
    "prompts",
    "classifier": "a sequence-classification fact-checker (*ForSequenceClassification): "
    "MiniCheck-RoBERTa-L or -DeBERTa-L (two labels), or an NLI model with an entailment label",
    "seq2seq": "a T5 fact-checker read as MiniCheck-Flan-T5-L (T5ForConditionalGeneration)",
}
#: The kinds read by ``backend.engines.fact_checkers`` rather than as a chat model.
CHECKER_KINDS = ("classifier", "seq2seq")

#: The public checkers whose kind is known without their configuration (MiniCheck's own,
#: Liyan06/MiniCheck ``minicheck/inference.py``).
KNOWN_CHECKERS = {
    "lytang/MiniCheck-RoBERTa-Large": "classifier",
    "lytang/MiniCheck-DeBERTa-v3-Large": "classifier",
    "lytang/MiniCheck-Flan-T5-Large": "seq2seq",
}


def _accepted() -> str:
    return "; ".join(f"{kind}: {what}" for kind, what in JUDGE_KINDS.items())


def unknown_kind(model: str, what: str) -> ValueError:
    """The refusal of a judge model of no accepted kind, naming the kinds accepted."""
    return ValueError(
        f"the groundedness judge model {model!r} is {what}, which the judge cannot read. "
        f"It reads these kinds: {_accepted()}"
    )


def entailment_label(id2label: dict[int, str]) -> int | None:
    """The index of the label naming entailment (``entailment``, ``ENTAILMENT``, ``entails``;
    not ``not_entailment``), or None."""
    found = [i for i, label in id2label.items() if label.strip().lower().startswith("entail")]
    return found[0] if len(found) == 1 else None


def classifier_reading(config: dict[str, Any], model: str = "the model") -> tuple[str, int]:
    """How a sequence classifier is fed and which label is read: ``("pair", i)`` for an NLI
    model (premise and hypothesis as a text pair, P(label i = entailment)), ``("joined", 1)``
    for a two-label checker with no entailment label, read as MiniCheck reads its RoBERTa and
    DeBERTa checkers (document, EOS, claim as one text; P(label 1 = supported)).

    Raises:
        ValueError: neither (the labels are named).
    """
    id2label = {int(k): str(v) for k, v in (config.get("id2label") or {}).items()}
    if not id2label:  # transformers leaves its default out of config.json: two labels
        count = int(config.get("num_labels") or 2)
        id2label = {i: f"LABEL_{i}" for i in range(count)}
    entail = entailment_label(id2label)
    if entail is not None:
        return "pair", entail
    if len(id2label) == 2:
        return "joined", 1
    labels = ", ".join(id2label[i] for i in sorted(id2label)) or "none"
    raise unknown_kind(
        model,
        f"a sequence classifier whose labels ({labels}) are neither MiniCheck's two nor name "
        "entailment",
    )


def judge_kind(config: dict[str, Any], model: str = "the model") -> str:
    """``causal``, ``classifier`` or ``seq2seq``, from a model's ``config.json`` contents.

    Raises:
        ValueError: a model of none of these kinds, with a message naming them.
    """
    architectures = [str(a) for a in config.get("architectures") or ()]
    model_type = str(config.get("model_type") or "unknown")
    if any(a.endswith("ForSequenceClassification") for a in architectures):
        classifier_reading(config, model)  # its labels must say what to read
        return "classifier"
    if config.get("is_encoder_decoder"):
        if model_type == "t5":
            return "seq2seq"
        raise unknown_kind(model, f"an encoder-decoder of type {model_type!r}, not T5")
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        return "causal"
    what = ", ".join(architectures) or f"a {model_type!r} model with no architecture named"
    raise unknown_kind(model, f"a {what}" if architectures else what)


def is_gguf_or_embedded(model: str) -> bool:
    """Whether ``model`` names GGUF weights (an embedded model, a ``.gguf`` file): causal."""
    from backend.engines.selection import runs_from_gguf

    return runs_from_gguf(model)


def local_config(model: str) -> dict[str, Any] | None:
    """The ``config.json`` of a local folder, or of a hub id already in the local cache;
    None where neither is on this machine (nothing is downloaded)."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        path: Path | None = folder / "config.json"
    else:
        path = _cached_config(model)
    if path is None or not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _cached_config(model: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(model, "config.json")
    except ValueError:  # not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None


def known_judge_kind(model: str) -> str | None:
    """The judge model's kind where it can be told without the network: GGUF weights and
    embedded models are causal; a local folder or cached hub id says so in its config; the
    MiniCheck ids are known. None otherwise (the loader asks the hub).

    Raises:
        ValueError: a local configuration of no accepted kind.
    """
    if is_gguf_or_embedded(model):
        return "causal"
    config = local_config(model)
    if config is not None:
        return judge_kind(config, model)
    return KNOWN_CHECKERS.get(model)
