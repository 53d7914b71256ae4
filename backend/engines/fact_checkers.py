"""Open fact-checkers as the groundedness judge's reader, each fed as its authors feed it.

What is followed, from MiniCheck's own code (github.com/Liyan06/MiniCheck,
``minicheck/inference.py`` class ``Inferencer`` and ``minicheck/minicheck.py``
``_score_inferencer``, Apache-2.0; read, not copied):

* MiniCheck-RoBERTa-L and -DeBERTa-L (``AutoModelForSequenceClassification``, two labels): one
  text, ``document + tokenizer.eos_token + claim`` (``</s>`` for RoBERTa, ``[SEP]`` for
  DeBERTa-v3), tokenized with ``max_length`` 512 (RoBERTa) or 2048 (DeBERTa), truncation and
  padding; the support is ``softmax(logits)[:, 1]``. Documents are cut into chunks of 400
  tokens of the checker's own tokenizer.
* MiniCheck-Flan-T5-L (``AutoModelForSeq2SeqLM``): ``"predict: " + document + "</s>" +
  claim``, ``max_length`` 2048; one decoder step from ``decoder_input_ids`` of zeros (T5's
  start token), the support ``softmax(logits[:, [3, 209]])[:, 1]``: token 3 is MiniCheck's
  "no support", 209 its "support". Documents are cut into chunks of 500 whitespace words.
* A claim's support is its best chunk's (MiniCheck takes the max over chunks); pairs are read
  16 at a time (its default batch).

An NLI model (a sequence classifier whose labels name entailment: ``cross-encoder/nli-*``,
``*-mnli``) is fed as those models' authors feed them (sentence-transformers' CrossEncoder,
transformers' text-classification pipeline): premise and hypothesis as a text pair, the
support ``softmax(logits)[entailment]``.

What differs from MiniCheck's script, on purpose: chunks follow the judge's paragraph and
sentence boundaries (``groundedness.claims.chunk_context``, its sizes counted as above) rather
than NLTK's sentences, and each claim is read against its likeliest chunks, not all of them
(``GroundednessJudge``'s ``chunks_per_claim``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from backend.engines.base import FactChecker
from backend.engines.judge_kinds import classifier_reading
from backend.engines.torch_placement import load_pretrained

#: MiniCheck's defaults (``minicheck.py``/``inference.py``).
CLASSIFIER_CHUNK_TOKENS = 400
SEQ2SEQ_CHUNK_WORDS = 500
SEQ2SEQ_MAX_LENGTH = 2048
RELATIVE_POSITIONS_MAX_LENGTH = 2048  # MiniCheck-DeBERTa's window
BATCH_SIZE = 16
#: The decoder tokens MiniCheck-Flan-T5 reads: "no support", "support".
SEQ2SEQ_LABEL_IDS = (3, 209)
SEQ2SEQ_PREFIX = "predict: "
#: Room left for the claim beside a chunk (512 - 400, as MiniCheck-RoBERTa has).
CLAIM_ROOM = 112


def classifier_max_length(config: Any, tokenizer: Any) -> int:
    """The longest input fed to a sequence classifier: 2048 for relative-position encoders
    (DeBERTa-v2/v3 without absolute positions, as MiniCheck feeds its DeBERTa), else the
    tokenizer's ``model_max_length``, else the position table (less RoBERTa's offset)."""
    if getattr(config, "relative_attention", False) and not getattr(
        config, "position_biased_input", True
    ):
        return RELATIVE_POSITIONS_MAX_LENGTH
    positions = int(getattr(config, "max_position_embeddings", 512))
    if str(getattr(config, "model_type", "")).endswith("roberta"):
        positions -= 2  # RoBERTa's positions start after its padding index
    declared = getattr(tokenizer, "model_max_length", None) or positions
    return min(int(declared), positions) if declared < 1_000_000 else positions


def _batches(items: Sequence, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SequenceClassificationChecker(FactChecker):
    """A sequence-classification checker: MiniCheck-RoBERTa-L / -DeBERTa-L, or an NLI model."""

    kind = "classifier"

    def __init__(
        self, model_path: str, device: str | None = None, dtype: str | None = None
    ) -> None:
        from transformers import AutoModelForSequenceClassification

        self.tokenizer, self.model, self.device = load_pretrained(
            AutoModelForSequenceClassification, model_path, device, dtype
        )
        self.input_form, self.label = classifier_reading(self.model.config.to_dict(), model_path)
        self.max_length = classifier_max_length(self.model.config, self.tokenizer)
        self.chunk_tokens = min(CLASSIFIER_CHUNK_TOKENS, self.max_length - CLAIM_ROOM)
        if self.chunk_tokens < 1:
            raise ValueError(f"{model_path!r}: a window of {self.max_length} tokens is too short")
        if self.input_form == "joined" and self.tokenizer.eos_token is None:
            raise ValueError(f"{model_path!r}: a two-label checker needs an EOS token")

    def encode(self, pairs: Sequence[tuple[str, str]]):
        """The inputs of a batch of (document, claim) pairs, as the model's authors build them."""
        if self.input_form == "joined":  # MiniCheck: document, EOS, claim as one text
            texts = [document + self.tokenizer.eos_token + claim for document, claim in pairs]
            return self.tokenizer(
                texts,
                max_length=self.max_length,
                truncation=True,
                padding=True,
                return_tensors="pt",
            )
        documents = [document for document, _ in pairs]
        claims = [claim for _, claim in pairs]
        return self.tokenizer(
            documents,
            claims,
            max_length=self.max_length,
            truncation=True,
            padding=True,
            return_tensors="pt",
        )

    def supports(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, int]]:
        results: list[tuple[float, int]] = []
        for batch in _batches(pairs, BATCH_SIZE):
            inputs = self.encode(batch).to(self.device)
            with torch.inference_mode():
                logits = self.model(**inputs).logits
            support = torch.softmax(logits.float(), dim=-1)[:, self.label]
            tokens = inputs["attention_mask"].sum(dim=1)
            results += zip(support.tolist(), tokens.tolist(), strict=True)
        return results

    def count_tokens(self, text: str) -> int:
        # verbose=False: a whole context is counted before it is cut, past the window.
        return len(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def close(self) -> None:
        self.model = None


class Seq2SeqChecker(FactChecker):
    """A T5 checker read as MiniCheck-Flan-T5-L is."""

    kind = "seq2seq"
    chunk_tokens = SEQ2SEQ_CHUNK_WORDS
    max_length = SEQ2SEQ_MAX_LENGTH

    def __init__(
        self, model_path: str, device: str | None = None, dtype: str | None = None
    ) -> None:
        from transformers import AutoModelForSeq2SeqLM

        self.tokenizer, self.model, self.device = load_pretrained(
            AutoModelForSeq2SeqLM, model_path, device, dtype
        )
        if self.model.config.vocab_size <= max(SEQ2SEQ_LABEL_IDS):
            raise ValueError(
                f"{model_path!r}: a vocabulary of {self.model.config.vocab_size} tokens has no "
                f"ids {SEQ2SEQ_LABEL_IDS}, the tokens MiniCheck-Flan-T5 answers with"
            )

    def encode(self, pairs: Sequence[tuple[str, str]]):
        """``predict: document</s>claim`` of each pair, tokenized as MiniCheck does."""
        eos = self.tokenizer.eos_token
        texts = [SEQ2SEQ_PREFIX + document + eos + claim for document, claim in pairs]
        return self.tokenizer(
            texts, max_length=self.max_length, truncation=True, padding=True, return_tensors="pt"
        )

    def supports(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, int]]:
        results: list[tuple[float, int]] = []
        labels = torch.tensor(SEQ2SEQ_LABEL_IDS, device=self.device)
        for batch in _batches(pairs, BATCH_SIZE):
            inputs = self.encode(batch).to(self.device)
            start = torch.zeros((len(batch), 1), dtype=torch.long, device=self.device)
            with torch.inference_mode():
                logits = self.model(**inputs, decoder_input_ids=start).logits[:, 0, :]
            support = torch.softmax(logits.float().index_select(1, labels), dim=-1)[:, 1]
            tokens = inputs["attention_mask"].sum(dim=1)
            results += zip(support.tolist(), tokens.tolist(), strict=True)
        return results

    def count_tokens(self, text: str) -> int:
        """Whitespace words: MiniCheck sizes Flan-T5's chunks in words."""
        return len(text.split())

    def close(self) -> None:
        self.model = None


def load_fact_checker(
    model_path: str, kind: str, device: str | None = None, dtype: str | None = None
) -> FactChecker:
    """The checker of ``kind`` (``classifier`` or ``seq2seq``) running ``model_path``."""
    if kind == "classifier":
        return SequenceClassificationChecker(model_path, device, dtype)
    if kind == "seq2seq":
        return Seq2SeqChecker(model_path, device, dtype)
    raise ValueError(f"not a fact-checker kind: {kind!r}")
