"""Log-gamma of strictly positive inputs: y = lgamma(x) = log|Gamma(x)|."""
import torch
import torch.nn as nn

CATEGORY = "math"
DTYPE = "float32"
SHAPES = [
    {"rows": 4096, "cols": 1024},
    {"rows": 1234, "cols": 567},
    {"rows": 128, "cols": 20011},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.lgamma(x)


def get_inputs(rows: int = 4096, cols: int = 1024):
    # (0.05, 12.05): crosses the minimum of Gamma near 1.46 and the zeros of lgamma at 1 and 2
    return [torch.rand(rows, cols) * 12.0 + 0.05]


def get_init_inputs():
    return []


def flops(rows: int = 4096, cols: int = 1024) -> float:
    # a rational/Stirling-series evaluation plus a log: about 20 operations per element
    return 20.0 * rows * cols


def bytes_moved(rows: int = 4096, cols: int = 1024) -> float:
    return 4.0 * (rows * cols + rows * cols)
