"""The k largest values of every row along the last dimension, sorted in descending order."""
import torch
import torch.nn as nn

CATEGORY = "reduction"
DTYPE = "float32"
SHAPES = [
    {"rows": 8192, "cols": 1000},
    {"rows": 511, "cols": 4097},
    {"rows": 65536, "cols": 61},
]


class Model(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.topk(x, self.k, dim=-1, largest=True, sorted=True).values


def get_inputs(rows: int = 8192, cols: int = 1000):
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [8]


def flops(rows: int = 8192, cols: int = 1000) -> float:
    # a streaming selection compares every element against the current k-th value,
    # plus a sort of the k survivors per row
    k = 8
    return 1.0 * rows * cols + rows * k * 3.0


def bytes_moved(rows: int = 8192, cols: int = 1000) -> float:
    return 4.0 * (rows * cols + rows * 8)
