"""Scatter-add of rows: out = base; out[index[i], :] += src[i, :] for every i (repeated indices accumulate)."""
import torch
import torch.nn as nn

CATEGORY = "indexing"
DTYPE = "float32"
SHAPES = [
    {"num_rows": 4096, "num_src": 32768, "dim": 128},
    {"num_rows": 1000, "num_src": 7777, "dim": 77},
    {"num_rows": 50000, "num_src": 4096, "dim": 256},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, base: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        return base.index_add(0, index, src)


def get_inputs(num_rows: int = 4096, num_src: int = 32768, dim: int = 128):
    base = torch.randn(num_rows, dim)
    # skewed row popularity: low rows receive many updates, high rows few or none
    u = torch.rand(num_src)
    index = (u * u * num_rows).to(torch.int64).clamp_(max=num_rows - 1)
    src = torch.randn(num_src, dim)
    return [base, index, src]


def get_init_inputs():
    return []


def flops(num_rows: int = 4096, num_src: int = 32768, dim: int = 128) -> float:
    return 1.0 * num_src * dim


def bytes_moved(num_rows: int = 4096, num_src: int = 32768, dim: int = 128) -> float:
    return 4.0 * (num_rows * dim + num_src * dim + num_rows * dim) + 8.0 * num_src
