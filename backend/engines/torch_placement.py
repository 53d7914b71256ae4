"""Where a torch model runs and in which precision, and loading one there: shared by the
transformers engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

_DTYPES = {
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "float32": torch.float32,
    "fp32": torch.float32,
}


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16 or AMX); private torch probes."""
    avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()
    return bool(avx512_bf16) or cpu_has_amx()


def cpu_has_amx() -> bool:
    """Whether this CPU has AMX tiles, on which torch's bf16 matmuls run several times faster
    than llama.cpp's 4-bit kernels evaluate prompts (private torch probe)."""
    return bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())


def resolve_dtype(name: str | None, device: str) -> torch.dtype:
    """The named precision, or the default for the device.

    On a GPU: bf16 where supported, else float16. On a CPU: bf16 when the CPU computes in
    bf16 natively, else float32 (on an AVX2-only CPU torch emulates bf16, and a bf16 matmul
    runs several times slower than float32).
    """
    if name is not None and name.lower() != "auto":
        try:
            return _DTYPES[name.lower()]
        except KeyError:
            raise ValueError(
                f"unknown dtype {name!r}; use one of: auto, bfloat16, float16, float32"
            ) from None
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def load_pretrained(
    model_class: Any, model_path: str, device: str | None, dtype: str | None
) -> tuple[Any, Any, str]:
    """The tokenizer and the model (``model_class.from_pretrained``) of a local folder or a
    Hugging Face model id, in eval mode on ``device`` (default: the GPU when there is one) in
    ``dtype`` (default: ``resolve_dtype``); a local folder is read without asking the hub.

    Returns:
        (tokenizer, model, device)
    """
    from transformers import AutoTokenizer

    device = device or default_device()
    local_only = Path(model_path).is_dir()
    tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=local_only)
    model = model_class.from_pretrained(
        model_path, dtype=resolve_dtype(dtype, device), local_files_only=local_only
    ).to(device)
    model.eval()
    return tokenizer, model, device
