"""Prefix caching: requests that share the start of their prompt (a long system prompt, a document) reuse the
keys and values already computed for it instead of running those tokens through the model again.

Prompts are cut into blocks of ``block_tokens`` tokens, as vLLM does. A block is named by a SHA-256 over the
model's key, the name of the block before it and its own tokens, so a name stands for the whole prefix up to
the block's end, on that model only: two models never share a block, and the tokens after a difference never
match. A block holds the keys and values of its tokens for every layer, one tensor ``[layers, 2, kv_heads,
block_tokens, head_dim]``. The cache is bounded in bytes; the least recently used block goes first. A lookup
or an insert touches a prompt's blocks from the last to the first, so a block is always at least as recent as
the blocks after it and eviction takes the ends of old prompts before their shared starts.

Copy on use: ``lookup`` concatenates the blocks into new tensors and ``insert`` clones what it keeps, so no
request ever holds a tensor the cache holds (transformers' caches grow, crop and get written in place).

Only tokens before the prompt's last one are reused (the model must still run one token to give the logits
of the first completion token), and only whole blocks. The reused keys and values are those a cold prefill
computes, up to float rounding (another split of the same matrix products): greedy outputs are the same.
Every method takes the cache's lock, so the server thread can read ``stats`` while the worker uses it.
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

BLOCK_TOKENS = 32


@dataclass
class _Block:
    kv: torch.Tensor  # [layers, 2, kv_heads, block_tokens, head_dim]
    nbytes: int


class PrefixCache:
    """Keys and values of prompt prefixes, by model and tokens, within ``capacity_bytes``."""

    def __init__(self, capacity_bytes: int, *, block_tokens: int = BLOCK_TOKENS) -> None:
        if capacity_bytes < 0 or block_tokens < 1:
            raise ValueError("capacity_bytes must be >= 0 and block_tokens >= 1")
        self.capacity_bytes = capacity_bytes
        self.block_tokens = block_tokens
        self._blocks: OrderedDict[bytes, _Block] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0  # lookups that reused at least one block
        self.misses = 0
        self.hit_tokens = 0  # prompt tokens not recomputed thanks to the cache
        self.evictions = 0  # blocks dropped to make room

    def _names(self, model_key: str, tokens: Sequence[int], count: int) -> list[bytes]:
        """The names of the first ``count`` blocks of ``tokens``."""
        names: list[bytes] = []
        parent = hashlib.sha256(model_key.encode()).digest()
        size = self.block_tokens
        for index in range(count):
            block = array("q", tokens[index * size : (index + 1) * size]).tobytes()
            parent = hashlib.sha256(parent + block).digest()
            names.append(parent)
        return names

    def _touch(self, names: list[bytes]) -> None:
        for name in reversed(names):
            self._blocks.move_to_end(name)

    def lookup(
        self, model_key: str, tokens: Sequence[int], *, min_length: int = 0
    ) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]]]:
        """The longest cached whole-block prefix of ``tokens[:-1]``: its length and, per layer, fresh
        ``(keys, values)`` tensors ``[1, kv_heads, length, head_dim]``; ``(0, [])`` on a miss, which a
        prefix shorter than ``min_length`` tokens counts as."""
        count = max(0, len(tokens) - 1) // self.block_tokens
        names = self._names(model_key, tokens, count)
        with self._lock:
            found: list[torch.Tensor] = []
            for name in names:
                block = self._blocks.get(name)
                if block is None:
                    break
                found.append(block.kv)
            if not found or len(found) * self.block_tokens < min_length:
                self.misses += 1
                return 0, []
            self._touch(names[: len(found)])
            self.hits += 1
            length = len(found) * self.block_tokens
            self.hit_tokens += length
            joined = torch.cat(found, dim=3)  # a copy: the request owns it
        return length, [(joined[i, 0][None], joined[i, 1][None]) for i in range(joined.shape[0])]

    def insert(
        self, model_key: str, tokens: Sequence[int], layers: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> int:
        """Keep the whole blocks of ``tokens`` not cached yet; ``layers`` gives per layer ``(keys, values)``
        ``[kv_heads, n, head_dim]`` for at least those tokens (n >= their count). Returns the blocks added."""
        size = self.block_tokens
        count = min(len(tokens), int(layers[0][0].shape[1])) // size if layers else 0
        names = self._names(model_key, tokens, count)
        with self._lock:
            new = [i for i, name in enumerate(names) if name not in self._blocks]
            if not new:
                self._touch(names)
                return 0
            per_block = sum(2 * keys[:, :size].numel() * keys.element_size() for keys, _ in layers)
            # Only the start of a prompt too long for the whole cache.
            fits = min(count, self.capacity_bytes // per_block) if per_block else 0
            new = [i for i in new if i < fits]
            names = names[:fits]
            if not new:
                return 0
            self._touch([name for name in names if name in self._blocks])
            keep = set(names)
            while self._blocks and self.bytes + per_block * len(new) > self.capacity_bytes:
                oldest = next(iter(self._blocks))
                if oldest in keep:  # only this prompt's blocks are left
                    break
                self.bytes -= self._blocks.pop(oldest).nbytes
                self.evictions += 1
            for i in new:
                columns = slice(i * size, (i + 1) * size)
                kv = torch.stack([torch.stack([k[:, columns], v[:, columns]]) for k, v in layers]).clone()
                self._blocks[names[i]] = _Block(kv, per_block)
                self.bytes += per_block
            self._touch(names)
        return len(new)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "hit_tokens": self.hit_tokens,
                "blocks": len(self._blocks),
                "bytes": self.bytes,
                "capacity_bytes": self.capacity_bytes,
                "evictions": self.evictions,
            }


# --- between the cache and transformers' caches ----------------------------------------------------------


def full_layers(cache: Any) -> bool:
    """Whether every layer of ``cache`` keeps all its tokens (a sliding-window layer drops the oldest), with
    keys and values of one shape."""
    layers = getattr(cache, "layers", None)
    if not layers or not all(type(layer) is DynamicLayer and layer.is_initialized for layer in layers):
        return False
    # Blocks stack keys and values of every layer in one tensor: they must all have one shape.
    return len({tuple(t.shape) for layer in layers for t in (layer.keys, layer.values)}) == 1


def reuse(engine: Any, prompt_ids: Sequence[int], *, min_length: int = 0) -> tuple[DynamicCache | None, int]:
    """A new ``DynamicCache`` holding the longest cached prefix of ``prompt_ids`` and that prefix's length,
    or ``(None, 0)`` when caching is off or nothing (at least ``min_length`` tokens long) is cached."""
    prefix: PrefixCache | None = engine.prefix_cache
    if prefix is None:
        return None, 0
    length, layers = prefix.lookup(engine.model_key, prompt_ids, min_length=min_length)
    if not length:
        return None, 0
    cache = DynamicCache(config=engine.model.config)
    if len(cache.layers) != len(layers):
        return None, 0
    for layer, (keys, values) in zip(cache.layers, layers, strict=True):
        full: Any = layer  # full_layers() guaranteed plain keys/values layers when these blocks were kept
        full.lazy_initialization(keys, values)
        full.keys, full.values = keys, values
    return cache, length


def remember(engine: Any, prompt_ids: Sequence[int], cache: Any, *, row: int = 0, start: int = 0) -> None:
    """Keep the prompt's blocks from row ``row`` of ``cache``, whose prompt tokens begin at column ``start``
    (a left-padded batch); nothing when caching is off or the model's cache does not keep every token."""
    prefix: PrefixCache | None = engine.prefix_cache
    if prefix is None or not full_layers(cache):
        return
    layers = [(layer.keys[row, :, start:], layer.values[row, :, start:]) for layer in cache.layers]
    prefix.insert(engine.model_key, prompt_ids, layers)
