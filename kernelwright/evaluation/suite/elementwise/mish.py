"""Mish activation, elementwise: y = x * tanh(softplus(x))."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "elementwise"
DTYPE = "float32"
SHAPES = [
    {"rows": 4096, "cols": 2048},
    {"rows": 1001, "cols": 3073},
    {"rows": 65536, "cols": 96},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.tanh(F.softplus(x))


def get_inputs(rows: int = 4096, cols: int = 2048):
    # spread of 3 reaches both the near-linear (x >> 0) and the decaying (x << 0) branches
    return [torch.randn(rows, cols) * 3.0]


def get_init_inputs():
    return []


def flops(rows: int = 4096, cols: int = 2048) -> float:
    # softplus (exp, add, log), tanh, multiply
    return 5.0 * rows * cols


def bytes_moved(rows: int = 4096, cols: int = 2048) -> float:
    return 4.0 * (rows * cols + rows * cols)
