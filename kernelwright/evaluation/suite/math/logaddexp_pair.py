"""Stable y = log(exp(a) + exp(b)) for equal-shaped a and b of large magnitude."""
import torch
import torch.nn as nn

CATEGORY = "math"
DTYPE = "float32"
SHAPES = [
    {"batch": 16, "rows": 512, "cols": 512},
    {"batch": 3, "rows": 419, "cols": 1001},
    {"batch": 1, "rows": 4097, "cols": 513},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.logaddexp(a, b)


def get_inputs(batch: int = 16, rows: int = 512, cols: int = 512):
    # magnitudes up to ~150: exp() of the raw values would overflow float32
    return [torch.randn(batch, rows, cols) * 40.0, torch.randn(batch, rows, cols) * 40.0]


def get_init_inputs():
    return []


def flops(batch: int = 16, rows: int = 512, cols: int = 512) -> float:
    # max, subtract, abs, exp, log1p, add
    return 6.0 * batch * rows * cols


def bytes_moved(batch: int = 16, rows: int = 512, cols: int = 512) -> float:
    n = batch * rows * cols
    return 4.0 * (n + n + n)
