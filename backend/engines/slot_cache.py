"""A key/value cache laid out by slot: ``slots x max_len`` positions per layer, allocated once.

Each running generation owns one slot (a batch row) for its whole life, and its token at
position ``p`` lies at column ``p`` of that row. Nothing is ever moved, padded or cut, so the
tensors keep their addresses from step to step: a decode step over them can be captured once
as a CUDA graph and replayed (``backend.engines.transformers_slots``), as vLLM's and compiled
transformers' static caches are. transformers' own ``StaticCache`` writes every row of a batch
at the same position; here each row has its own, so generations of different lengths decode
together.

Two kinds of forward pass use it, set before each pass with ``plan_decode`` or
``plan_prefill``:

- a decode step: batch row ``i`` is slot ``i``; each row's new key lands at its own position,
  and attention reads the first ``span`` columns of the rows (the mask hides the rest);
- a prefill: the prompts of several new generations packed into one sequence; each token's key
  lands in its slot at its position, and attention reads the packed pass itself (a
  block-diagonal causal mask keeps each prompt to its own tokens).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin


class SlotLayer(CacheLayerMixin):
    """One layer's keys and values, ``(slots, kv_heads, max_len, head_dim)``."""

    is_compileable = True

    def __init__(self, cache: SlotCache, shape: tuple[int, int, int, int], dtype, device) -> None:
        super().__init__()
        self._cache = cache
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """Allocated up front (the sizes come from the model's config)."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        plan = self._cache
        if plan.packed:
            # (1, heads, tokens, dim): token t goes to slot prefill_slots[t], at its position.
            where = (plan.prefill_slots, slice(None), plan.prefill_positions)
            self.keys[where] = key_states[0].transpose(0, 1)
            self.values[where] = value_states[0].transpose(0, 1)
            return key_states, value_states
        # (rows, heads, 1, dim): row i is slot i.
        rows = key_states.shape[0]
        where = (plan.row_index[:rows], slice(None), plan.decode_positions[:rows])
        self.keys[where] = key_states[:, :, 0]
        self.values[where] = value_states[:, :, 0]
        return self.keys[:rows, :, : plan.span], self.values[:rows, :, : plan.span]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self._cache.span, 0

    def get_seq_length(self) -> int:
        return self._cache.span

    def get_max_length(self) -> int:
        return self.keys.shape[2]


class SlotCache(Cache):
    """The cache of ``slots`` generations of up to ``max_len`` tokens each, for ``config``'s
    model (its layers, key/value heads and head size)."""

    def __init__(self, config, slots: int, max_len: int, dtype, device) -> None:
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads
        )
        shape = (slots, heads, max_len, head_dim)
        self.slots_count = slots
        self.max_len = max_len
        self.packed = False
        #: The attention span of a decode step: how many columns of each row it reads.
        self.span = max_len
        # Fixed tensors a captured decode step reads: the rows, and where each row writes.
        self.row_index = torch.arange(slots, device=device)
        self.decode_positions = torch.zeros(slots, dtype=torch.long, device=device)
        self.prefill_slots = self.prefill_positions = self.row_index
        super().__init__(
            layers=[SlotLayer(self, shape, dtype, device) for _ in range(config.num_hidden_layers)]
        )

    def plan_decode(self, positions: torch.Tensor, span: int) -> None:
        """The next pass is a decode step: row ``i`` (slot ``i``) writes at ``positions[i]``
        and attends to its first ``span`` columns. ``positions`` is copied into the cache's
        own tensor, whose address a captured graph keeps."""
        self.packed = False
        self.span = span
        self.decode_positions[: positions.shape[0]].copy_(positions)

    def plan_prefill(self, slots: torch.Tensor, positions: torch.Tensor) -> None:
        """The next pass is a packed prefill: token ``t`` goes to slot ``slots[t]`` at
        ``positions[t]``."""
        self.packed = True
        self.prefill_slots, self.prefill_positions = slots, positions
