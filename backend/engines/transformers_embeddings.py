"""An embedding engine on a transformers encoder: token windows in, mean-pooled vectors out.

Works for the converted multilingual-e5-small folder and for any encoder a user names (a
Hugging Face id or a local folder). The engine only tokenizes and pools; the service above it
adds prefixes, cuts long texts into windows, combines a text's windows weighted by their
content length and L2-normalises (``backend.embedding_service``).

Throughput comes from batching: windows are sorted by length and grouped under a token budget,
so a batch pads little and its matmuls are large. Pooling is the e5 / sentence-transformers
mean over every attended position, the begin and end tokens included.

Not thread-safe: one engine runs one batch at a time, callers serialise access.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from transformers import AutoModel

from backend.engines.base import EmbeddingEngine
from backend.engines.torch_placement import load_pretrained

logger = logging.getLogger(__name__)

#: Padded tokens per forward pass. On CPU larger batches stop paying off early (and attention
#: memory grows with it); a GPU wants many more tokens in flight.
_CPU_TOKEN_BUDGET = 8192
_GPU_TOKEN_BUDGET = 65536
#: The share of a batch row that may be padding. On CPU compute is the cost and a small batch
#: costs little more per token; a GPU needs wide batches more than it minds some padding.
_CPU_MAX_PADDING = 0.1
_GPU_MAX_PADDING = 0.3
#: A tokenizer's "no limit" placeholder for model_max_length is a huge number.
_UNSET_LENGTH = 10**9


class TransformersEmbeddingEngine(EmbeddingEngine):
    """Runs ``AutoModel`` (an encoder) from a local folder or a Hugging Face model id."""

    def __init__(
        self, model_path: str, device: str | None = None, dtype: str | None = None
    ) -> None:
        self.tokenizer, self.model, self.device = load_pretrained(
            AutoModel, model_path, device, dtype
        )
        config = self.model.config
        self.dimensions = int(config.hidden_size)
        self.max_window_tokens = self._window_limit(config)
        self._specials = self._begin_end_ids()
        pad_id = self.tokenizer.pad_token_id
        self._pad_id = int(pad_id) if pad_id is not None else 0  # masked out either way
        on_gpu = self.device.startswith("cuda")
        self._token_budget = _GPU_TOKEN_BUDGET if on_gpu else _CPU_TOKEN_BUDGET
        self._max_padding = _GPU_MAX_PADDING if on_gpu else _CPU_MAX_PADDING
        logger.info(
            "embedding model %s: %s on %s, %d dimensions, windows of %d tokens",
            model_path,
            self.model.dtype,
            self.device,
            self.dimensions,
            self.max_window_tokens,
        )

    def _window_limit(self, config) -> int:
        """The tokens one window may hold, begin and end tokens included.

        The smaller of the tokenizer's ``model_max_length`` and the position table. RoBERTa-style
        embeddings number positions from ``padding_idx + 1``, which costs that many rows.
        """
        limits = []
        tokenizer_limit = self.tokenizer.model_max_length
        if tokenizer_limit and tokenizer_limit < _UNSET_LENGTH:
            limits.append(int(tokenizer_limit))
        positions = getattr(config, "max_position_embeddings", None)
        if positions:
            padding_idx = getattr(getattr(self.model, "embeddings", None), "padding_idx", None)
            offset = padding_idx + 1 if isinstance(padding_idx, int) else 0
            limits.append(int(positions) - offset)
        if not limits:
            raise ValueError("neither the tokenizer nor the model config gives a maximum length")
        return min(limits)

    def _begin_end_ids(self) -> tuple[list[int], list[int]]:
        """The ids wrapped around each window: cls/sep (BERT, XLM-R) or else bos/eos."""
        tokenizer = self.tokenizer
        begin = tokenizer.cls_token_id
        end = tokenizer.sep_token_id
        if begin is None:
            begin = tokenizer.bos_token_id
        if end is None:
            end = tokenizer.eos_token_id
        return ([int(begin)] if begin is not None else []), ([int(end)] if end is not None else [])

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Content ids of each text: no special tokens, no truncation (one batched call)."""
        texts = list(texts)
        if not texts:
            return []
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None:  # a tokenizer without a Rust backend
            return self.tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
        # The transformers wrapper leaves its last call's settings on the shared backend.
        if backend.truncation is not None:
            backend.no_truncation()
        if backend.padding is not None:
            backend.no_padding()
        return [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=False)]

    def embed_windows(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        """Mean-pooled last hidden states, float32, one row per window in the given order."""
        out = np.empty((len(windows), self.dimensions), dtype=np.float32)
        if not windows:
            return out
        begin, end = self._specials
        limit = self.max_window_tokens - len(begin) - len(end)
        too_long = [i for i, window in enumerate(windows) if len(window) > limit]
        if too_long:
            raise ValueError(
                f"window {too_long[0]} holds {len(windows[too_long[0]])} tokens; "
                f"at most {limit} fit next to the special tokens"
            )
        with torch.inference_mode():
            for batch in self._batches(windows):
                inputs = [begin + list(windows[i]) + end for i in batch]
                out[batch] = self._pooled(inputs)
        return out

    def _batches(self, windows: Sequence[Sequence[int]]) -> Iterator[list[int]]:
        """Indices of windows, longest first, in batches that fit the token budget.

        A batch also ends before a window that would be padded by more than
        the engine's share of padding (``_CPU_MAX_PADDING`` or ``_GPU_MAX_PADDING``) of the
        batch width: padding costs as much compute as real tokens.
        """
        extra = len(self._specials[0]) + len(self._specials[1])
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]), reverse=True)
        batch: list[int] = []
        width = 0  # the batch's first (longest) window, special tokens included
        for index in order:
            length = len(windows[index]) + extra
            if batch and (
                (len(batch) + 1) * width > self._token_budget
                or length < width * (1 - self._max_padding)
            ):
                yield batch
                batch = []
            if not batch:
                width = length
            batch.append(index)
        if batch:
            yield batch

    def _pooled(self, inputs: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in inputs)
        input_ids = torch.full((len(inputs), width), self._pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(inputs), width), dtype=torch.long)
        for row, ids in enumerate(inputs):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, : len(ids)] = 1
        input_ids = input_ids.to(self.device)
        attention_mask = attention_mask.to(self.device)
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(torch.float32)
        summed = (hidden.to(torch.float32) * mask).sum(dim=1)
        return (summed / mask.sum(dim=1)).cpu().numpy()
