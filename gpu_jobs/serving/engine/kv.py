"""The KV cache of the batch tier's running batch, which sequences join and leave between decode steps.

Per model layer, keys and values live in one preallocated tensor ``[rows, kv_heads, capacity, head_dim]``, so
a decode step writes its column in place instead of concatenating the whole cache (``DynamicCache`` does,
about a sixth of a step's time at 16 rows). Every row's tokens end at column ``width``, where the next token
goes: a row with a shorter history is padded on the left, and ``starts`` says where each row's tokens begin.
The attention mask and the position ids follow from ``starts`` and ``width``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

# Columns added at a time when a row outgrows the buffer (and kept spare after a rebuild).
GROWTH = 64


class _Layer(DynamicLayer):
    """One model layer's keys and values; ``update`` (called by the model) appends columns in place."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        super().__init__()
        self.key_buffer, self.value_buffer, self.length = keys, values, length
        self.is_initialized = True
        self._expose()

    def _expose(self) -> None:
        self.keys = self.key_buffer[:, :, : self.length]
        self.values = self.value_buffer[:, :, : self.length]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        end = self.length + key_states.shape[-2]
        if end > self.key_buffer.shape[2]:
            self.key_buffer = _widen(self.key_buffer, end + GROWTH)
            self.value_buffer = _widen(self.value_buffer, end + GROWTH)
        self.key_buffer[:, :, self.length : end] = key_states
        self.value_buffer[:, :, self.length : end] = value_states
        self.length = end
        self._expose()
        return self.keys, self.values


def _widen(buffer: torch.Tensor, capacity: int) -> torch.Tensor:
    rows, heads, _, dim = buffer.shape
    wider = buffer.new_zeros((rows, heads, capacity, dim))
    wider[:, :, : buffer.shape[2]] = buffer
    return wider


class RowsKV:
    """The cache of the rows of a running batch (in the caller's row order: it keeps its lists aligned)."""

    def __init__(self) -> None:
        # Any: transformers types a layer's keys and values as optional; here every layer holds them.
        self.layers: list[Any] = []
        self.starts = torch.zeros(0, dtype=torch.long)
        self.cache: Cache | None = None  # what the model gets as ``cache``

    @property
    def rows(self) -> int:
        return int(self.starts.shape[0])

    @property
    def width(self) -> int:
        return self.layers[0].length if self.layers else 0

    def attention_mask(self) -> torch.Tensor:
        """The mask of the next decode step, ``[rows, width + 1]`` (the new token's column included)."""
        columns = torch.arange(self.width + 1)
        return (columns[None, :] >= self.starts[:, None]).long()

    def positions(self) -> torch.Tensor:
        """Each row's position of the next token, ``[rows, 1]``."""
        return (self.width - self.starts)[:, None]

    def join(self, prefilled: Cache, starts: torch.Tensor) -> None:
        """Append the rows of ``prefilled`` (the cache of a left-padded prefill, one row per entry of
        ``starts``) after the current rows, aligning both on their last column."""
        prefilled_layers: list[Any] = list(prefilled.layers)  # filled: keys and values are tensors
        old_width, new_width = self.width, prefilled_layers[0].keys.shape[2]
        width = max(old_width, new_width)
        parts = [(layer.keys, layer.values) for layer in prefilled_layers]
        if self.layers:
            old = [(layer.keys, layer.values) for layer in self.layers]
            self._rebuild(width, [(old, width - old_width), (parts, width - new_width)])
            self.starts = torch.cat([self.starts + (width - old_width), starts + (width - new_width)])
        else:
            self._rebuild(width, [(parts, 0)])
            self.starts = starts.clone()

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` (indices, in the order given), dropping leading columns none of them uses."""
        if rows.numel() == 0:
            self.layers, self.starts, self.cache = [], self.starts[:0], None
            return
        starts = self.starts[rows]
        drop = int(starts.min())
        if drop == 0 and rows.numel() == self.rows:
            return
        width = self.width
        kept = [(layer.keys[rows, :, drop:], layer.values[rows, :, drop:]) for layer in self.layers]
        self._rebuild(width - drop, [(kept, 0)])
        self.starts = starts - drop

    def _rebuild(self, width: int, parts: list[tuple[list[tuple[torch.Tensor, torch.Tensor]], int]]) -> None:
        """New buffers of ``width`` columns (plus room to grow) holding ``parts`` stacked by rows; each
        part is per-layer (keys, values) placed from the given column on, the columns before it zero."""
        rows = sum(part[0][0][0].shape[0] for part in parts)
        layers = []
        for index in range(len(parts[0][0])):
            _, heads, _, dim = parts[0][0][index][0].shape
            keys = parts[0][0][index][0].new_zeros((rows, heads, width + GROWTH, dim))
            values = torch.zeros_like(keys)
            row = 0
            for per_layer, column in parts:
                part_keys, part_values = per_layer[index]
                count, _, length, _ = part_keys.shape
                keys[row : row + count, :, column : column + length] = part_keys
                values[row : row + count, :, column : column + length] = part_values
                row += count
            layers.append(_Layer(keys, values, width))
        self.layers = layers
        self.cache = Cache(layers=list(layers))
