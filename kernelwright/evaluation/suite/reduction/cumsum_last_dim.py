"""Inclusive prefix sum (scan) along the last dimension: y[r, j] = sum_{i <= j} x[r, i]."""
import torch
import torch.nn as nn

CATEGORY = "reduction"
DTYPE = "float32"
SHAPES = [
    {"rows": 8192, "cols": 1024},
    {"rows": 3001, "cols": 777},
    {"rows": 1024, "cols": 4097},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs(rows: int = 8192, cols: int = 1024):
    # a small positive drift keeps the running sums away from zero for most of each row
    return [torch.randn(rows, cols) + 0.1]


def get_init_inputs():
    return []


def flops(rows: int = 8192, cols: int = 1024) -> float:
    return 1.0 * rows * cols


def bytes_moved(rows: int = 8192, cols: int = 1024) -> float:
    return 4.0 * (rows * cols + rows * cols)
