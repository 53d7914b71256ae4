"""Models of the real checker architectures with random weights, each saved with a tokenizer
built here from a small vocabulary (no hub): what ``CORE_JUDGE_MODEL`` names in the tests of
``backend.engines.fact_checkers`` (``size="tiny"``), and in ``benchmarks.judge.checker_speed``
at the published checkers' sizes (``size="large"``: RoBERTa-L, DeBERTa-v3-L, Flan-T5-L layers
and widths; the vocabulary stays this module's, which changes only the embedding tables).

* ``roberta_minicheck``: RobertaForSequenceClassification, two labels (MiniCheck-RoBERTa-L's
  shape), a byte-level BPE tokenizer with RoBERTa's special tokens and a 512-token window;
* ``deberta_minicheck`` / ``deberta_nli``: DebertaV2ForSequenceClassification with DeBERTa-v3's
  relative positions, MiniCheck-DeBERTa-L's two labels ("0", "1") or an NLI model's three
  (contradiction, entailment, neutral, as cross-encoder/nli-deberta-v3-* name them);
* ``t5_minicheck``: T5ForConditionalGeneration (Flan-T5's gated-GELU), a unigram tokenizer
  whose ids 0-3 are T5's (``<pad>``, ``</s>``, ``<unk>``, ``▁``) and whose id 209 is ``▁1``, so
  the ids MiniCheck reads (3 and 209) are the tokens they are in T5's vocabulary;
* ``qwen2_causal``: Qwen2ForCausalLM with the small profile's tokenizer and chat template;
* ``bert_without_head``: BertModel, a kind the judge refuses.

Weights come from ``torch.manual_seed``: tests must hold for any weights.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch

CORPUS = [
    "The tower is tall and old. The ferry carries 196 passengers and leaves at nine.",
    "The museum opens at 9:00 on weekdays and is closed on Monday.",
    "Filler paragraph number about topic. Claims, documents and chunks of evidence.",
] * 3

#: Word pieces of the unigram vocabularies (T5, DeBERTa-v3).
WORDS = ["The", "tower", "is", "tall", "old", "ferry", "carries", "passengers", "museum"]


def _unigram_pieces(specials: list[str], size: int) -> list[tuple[str, float]]:
    """``specials``, ``▁``, single characters, ``▁word`` pieces, fillers up to id 209, ``▁1``.

    Words score above characters so they are kept whole; ``0`` has no ``▁0`` piece, so "0"
    starts with ``▁`` (id 3 after T5's three specials) as it does in T5's vocabulary.
    """
    pieces = [(p, 0.0) for p in specials] + [("▁", -2.0)]
    pieces += [(c, -5.0) for c in string.ascii_letters + string.digits + string.punctuation]
    pieces += [(f"▁{w}", -1.0) for w in WORDS]
    pieces += [(f"▁filler{i}", -30.0) for i in range(209 - len(pieces))]
    pieces += [("▁1", -1.0)]
    pieces += [(f"▁spare{i}", -30.0) for i in range(size - len(pieces))]
    return pieces


def _roberta_tokenizer():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizer

    bpe = ByteLevelBPETokenizer()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator(CORPUS, vocab_size=320, min_frequency=1, special_tokens=specials)
    model = json.loads(bpe._tokenizer.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return RobertaTokenizer(vocab=model["vocab"], merges=merges, model_max_length=512)


def _deberta_tokenizer():
    from transformers import DebertaV2Tokenizer

    pieces = _unigram_pieces(["[PAD]", "[CLS]", "[SEP]", "[UNK]"], 240) + [("[MASK]", 0.0)]
    return DebertaV2Tokenizer(vocab=pieces, unk_id=3)


def _t5_tokenizer():
    from transformers import T5Tokenizer

    return T5Tokenizer(vocab=_unigram_pieces(["<pad>", "</s>", "<unk>"], 240), extra_ids=0)


def _save(model, tokenizer, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


#: Encoder widths and depths: tiny for tests, RoBERTa-L's and DeBERTa-v3-L's for speed.
ENCODER_SIZES = {
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64),
    "large": dict(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
    ),
}
#: T5's: tiny for tests, Flan-T5-L's for speed.
T5_SIZES = {
    "tiny": dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4),
    "large": dict(
        d_model=1024, d_kv=64, d_ff=2816, num_layers=24, num_decoder_layers=24, num_heads=16
    ),
}
SMALL = ENCODER_SIZES["tiny"]


def roberta_minicheck(folder: Path, seed: int = 0, size: str = "tiny") -> Path:
    from transformers import RobertaConfig, RobertaForSequenceClassification

    tokenizer = _roberta_tokenizer()
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=514,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        num_labels=2,
        **ENCODER_SIZES[size],
    )
    torch.manual_seed(seed)
    return _save(RobertaForSequenceClassification(config), tokenizer, folder)


def _deberta(folder: Path, id2label: dict[int, str], seed: int, size: str = "tiny") -> Path:
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    tokenizer = _deberta_tokenizer()
    config = DebertaV2Config(  # DeBERTa-v3's attention: relative positions only
        vocab_size=len(tokenizer),
        relative_attention=True,
        position_biased_input=False,
        pos_att_type=["p2c", "c2p"],
        max_relative_positions=-1,
        position_buckets=64,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        type_vocab_size=0,
        pad_token_id=tokenizer.pad_token_id,
        id2label=id2label,
        label2id={label: i for i, label in id2label.items()},
        **ENCODER_SIZES[size],
    )
    torch.manual_seed(seed)
    return _save(DebertaV2ForSequenceClassification(config), tokenizer, folder)


def deberta_minicheck(folder: Path, seed: int = 0, size: str = "tiny") -> Path:
    return _deberta(folder, {0: "0", 1: "1"}, seed, size)


def deberta_nli(folder: Path, seed: int = 0) -> Path:
    return _deberta(folder, {0: "contradiction", 1: "entailment", 2: "neutral"}, seed)


def t5_minicheck(folder: Path, seed: int = 0, size: str = "tiny") -> Path:
    from transformers import T5Config, T5ForConditionalGeneration

    tokenizer = _t5_tokenizer()
    config = T5Config(
        vocab_size=len(tokenizer),
        **T5_SIZES[size],
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    torch.manual_seed(seed)
    return _save(T5ForConditionalGeneration(config), tokenizer, folder)


def qwen2_causal(folder: Path, seed: int = 0) -> Path:
    """The small profile's tokenizer (with its chat template) over a tiny Qwen2."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from backend.backends.local.config import PROFILE_CHAT_MODELS
    from backend.engines.weights.embedded_chat import EMBEDDED_CHAT_MODELS, convert_tokenizer

    source = convert_tokenizer(EMBEDDED_CHAT_MODELS[PROFILE_CHAT_MODELS["small"]])
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    return _save(Qwen2ForCausalLM(config), tokenizer, folder)


def bert_without_head(folder: Path, seed: int = 0) -> Path:
    from transformers import BertConfig, BertModel

    tokenizer = _deberta_tokenizer()
    torch.manual_seed(seed)
    return _save(BertModel(BertConfig(vocab_size=len(tokenizer), **SMALL)), tokenizer, folder)
