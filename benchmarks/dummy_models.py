"""Models of a real architecture with random weights, built from a config and a tokenizer
alone (vLLM's ``--load-format dummy``): the GPU benchmark's models (``benchmarks.gpu``), on a
machine that has no copy of the weights.

Speed does not depend on the weights' values when every stream decodes a fixed number of
tokens; quality means nothing, and every figure measured on them says so. A source folder
holds ``config.json`` and the tokenizer's files (``*.xz`` files are unpacked), as
``../shared/gpu-bench/models/`` does; without one, the profile's embedded chat model gives
its config (read from its GGUF's header) and its tokenizer.
"""

from __future__ import annotations

import lzma
import os
import shutil
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
#: Where the GPU kit's model files may be: ``CORE_GPU_KIT``, a copy of the kit in the
#: checkout (``.gpu/``, git-ignored, as it travels to a GPU machine), or ``../shared``.
KIT_PLACES = [
    Path(p)
    for p in (os.environ.get("CORE_GPU_KIT"), _ROOT / ".gpu", _ROOT.parent / "shared" / "gpu-bench")
    if p
]
#: The default profile's chat and embedding architectures, as the kit names them.
KIT_CHAT, KIT_EMBEDDINGS = "qwen2.5-coder-1.5b-instruct", "multilingual-e5-small"


def kit_folder(name: str) -> Path | None:
    """The kit's files of the model ``name``, wherever the kit is; None without a kit."""
    return next((p / "models" / name for p in KIT_PLACES if (p / "models" / name).is_dir()), None)


def unpack(source: Path, target: Path) -> None:
    """Copy ``source``'s files into a fresh ``target``, unpacking ``*.xz``."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for path in sorted(p for p in source.iterdir() if p.is_file()):
        if path.suffix == ".xz":
            with lzma.open(path, "rb") as packed, (target / path.stem).open("wb") as out:
                shutil.copyfileobj(packed, out, 16 << 20)
        else:
            shutil.copy2(path, target / path.name)


def profile_chat_files(profile: str, target: Path) -> None:
    """The profile's embedded chat model's config and tokenizer in ``target`` (no weights)."""
    from transformers import AutoConfig

    from backend.backends.local.config import PROFILE_CHAT_MODELS
    from backend.engines.weights.embedded_chat import (
        EMBEDDED_CHAT_MODELS,
        assemble_gguf,
        convert_tokenizer,
    )

    model = EMBEDDED_CHAT_MODELS[PROFILE_CHAT_MODELS[profile]]
    unpack(convert_tokenizer(model), target)
    gguf = assemble_gguf(model)
    AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(target)


def shrink(config, causal: bool) -> None:
    """Two small layers: a dry run of the benchmark on a CPU in seconds."""
    config.num_hidden_layers = 2
    if not causal:
        return
    config.hidden_size, config.intermediate_size = 128, 256
    config.num_attention_heads, config.num_key_value_heads = 4, 2
    if getattr(config, "head_dim", None):
        config.head_dim = 32
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types)[:2]
    if getattr(config, "max_window_layers", None):
        config.max_window_layers = min(config.max_window_layers, 2)


def build(folder: Path, causal: bool, device: str, tiny: bool = False) -> dict:
    """Give the model whose config and tokenizer ``folder`` holds random weights (seed 0) and
    save them there; the chat model in bf16, the embedding model in float32 (the engines pick
    their compute dtype). Returns its parameter count and weight bytes."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    if tiny:
        shrink(config, causal)
    torch.manual_seed(0)
    with torch.device(device):
        if causal:
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        else:
            model = AutoModel.from_config(config, dtype=torch.float32)
    carried = folder / "generation_config.json"
    kept = carried.read_bytes() if carried.exists() else None
    model.save_pretrained(folder)
    if kept is not None:  # save_pretrained rewrites it from the model: keep the end-of-turn ids
        carried.write_bytes(kept)
    embedding = model.get_input_embeddings().weight
    sizes = {
        "params": sum(p.numel() for p in model.parameters()),
        "weight_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        # What one decoded token reads: every weight but the input embedding table's rows.
        "bytes_per_token": sum(p.numel() * p.element_size() for p in model.parameters())
        - embedding.numel() * embedding.element_size(),
        "layers": config.num_hidden_layers,
    }
    del model
    return sizes


def dummy_models(
    target: Path,
    profile: str,
    device: str,
    chat_source: Path | None,
    tiny: bool,
    embeddings: bool = True,
) -> tuple[Path, Path | None, dict]:
    """Build the chat model (from ``chat_source``, else the kit's, else the profile's) and,
    where the kit carries it and ``embeddings`` asks for it, the embedding model, under
    ``target``: their folders (None: the profile's own embedding model serves) and the chat
    model's sizes."""
    chat = target / "chat"
    source = chat_source or kit_folder(KIT_CHAT)
    if source is not None:
        unpack(source, chat)
    else:
        profile_chat_files(profile, chat)
    sizes = build(chat, causal=True, device=device, tiny=tiny)
    kit_embeddings = kit_folder(KIT_EMBEDDINGS) if embeddings else None
    if kit_embeddings is None:
        return chat, None, sizes
    folder = target / "embeddings"
    unpack(kit_embeddings, folder)
    build(folder, causal=False, device=device, tiny=tiny)
    return chat, folder, sizes
