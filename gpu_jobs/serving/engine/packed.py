"""Linear layers whose weights are also reordered once for oneDNN's GEMM, for products of a few rows.

The batch tier's decode steps (one row per sequence) and turbo's verification steps (the proposed tokens of
one sequence) multiply 2-32 rows by every weight matrix. The default CPU path (MKL sgemm) repacks each
weight matrix on every such call, which at that size costs about as much as the product; a weight reordered
once at load skips that (about a fifth of a 16-row decode step on SmolLM2-135M). For one row (plain decoding)
the default path is faster, so it is kept for that, at the cost of holding the weights twice. Results differ
from the default path in the last bits (another summation order), as batched results already do.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional

ROWS_HINT = 16  # the number of rows oneDNN picks its weight layout for; any number works


class PackedLinear(nn.Module):
    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), ROWS_HINT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() == x.shape[-1]:  # one row
            return functional.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def pack_linears(model: Any) -> int:
    """Replace every ``nn.Linear`` of ``model`` (used for inference only from then on) by a ``PackedLinear``;
    returns how many, 0 where this torch has no oneDNN."""
    if not torch.backends.mkldnn.is_available():
        return 0
    count = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, PackedLinear(child))
                count += 1
    return count
