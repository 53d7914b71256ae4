"""The sampling a request gets where it sets no ``top_p`` or ``top_k``: the model's own.

OpenAI's API draws from the whole distribution unless asked otherwise (``top_p`` 1). The
engines teams run open models on do not: vLLM applies the model's ``generation_config.json``
to what a request leaves unset (``--generation-config auto``, its default), which for the
Qwen2.5 instruct models, the embedded ones included, is ``top_p`` 0.8 and ``top_k`` 20;
llama-server's defaults are ``top_k`` 40, ``top_p`` 0.95 and Ollama's ``top_k`` 40, ``top_p``
0.9. Drawn from the whole distribution at the spec's default temperature (0.7), the 0.5B
model now and then takes a token from the far tail and its answer goes off track (a JSON
string that runs to its bound: benchmarks/README.md, "Sampling from the model's nucleus").
So, as vLLM does, a request's unset ``top_p`` and ``top_k`` take the values the model's
authors publish, and where they publish none, none applies. Only these two are taken:
the published ``repetition_penalty`` is not (constrained strings have their own, aimed
penalty: ``backend.engines.sampling``), and the temperature is the spec's.

Where the values come from: an embedded model's are the upstream model's (its GGUF carries
no ``general.sampling.*`` keys); a user's GGUF file's are those keys where present; a
Hugging Face model's are the values its ``generation_config.json`` sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.engines.base import PublishedSampling

#: Qwen2.5-Coder-0.5B/1.5B-Instruct's ``generation_config.json`` (as the other Qwen2.5
#: instruct models'): top_p 0.8, top_k 20 (with temperature 0.7 and repetition_penalty 1.1).
QWEN25_INSTRUCT = PublishedSampling(top_p=0.8, top_k=20)


def from_generation_config(values: Mapping[str, Any]) -> PublishedSampling:
    """From the values a ``generation_config.json`` sets (``GenerationConfig.to_diff_dict()``:
    not transformers' class defaults, which every model would otherwise seem to publish)."""
    return _published(values.get("top_p"), values.get("top_k"))


def from_gguf_metadata(metadata: Mapping[str, Any]) -> PublishedSampling:
    """From a GGUF file's ``general.sampling.top_p`` and ``general.sampling.top_k`` (llama.cpp's
    converter writes them from the model's generation config; values may be strings, as
    llama.cpp lists its metadata)."""
    top_p, top_k = (metadata.get(f"general.sampling.{key}") for key in ("top_p", "top_k"))
    return _published(top_p, top_k)


def _published(top_p: Any, top_k: Any) -> PublishedSampling:
    defaults = PublishedSampling()
    p = float(top_p) if top_p is not None else defaults.top_p
    k = int(float(top_k)) if top_k is not None else defaults.top_k
    # Out-of-range values are ignored, not trusted: they would fail a request's own checks.
    return PublishedSampling(
        top_p=p if 0.0 < p <= 1.0 else defaults.top_p,
        top_k=k if k > 0 else defaults.top_k,
    )
