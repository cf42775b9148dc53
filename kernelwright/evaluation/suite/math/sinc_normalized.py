"""Normalized sinc scaled per column: y[r, c] = sinc(x[r, c] * freq[c]) = sin(pi z) / (pi z), with sinc(0) = 1."""
import torch
import torch.nn as nn

CATEGORY = "math"
DTYPE = "float32"
COLS = 1023  # fixed: the model owns one frequency per column
SHAPES = [
    {"rows": 8192},
    {"rows": 3001},
    {"rows": 127},
]


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        # per-column frequencies in [0.5, 2.5)
        self.freq = nn.Parameter(torch.rand(cols) * 2.0 + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sinc(x * self.freq)


def get_inputs(rows: int = 8192):
    x = torch.randn(rows, COLS) * 2.0
    # exact zeros exercise the removable singularity
    x[::7, ::5] = 0.0
    return [x]


def get_init_inputs():
    return [COLS]


def flops(rows: int = 8192) -> float:
    # scale, multiply by pi, sin, divide (plus the zero test)
    return 5.0 * rows * COLS


def bytes_moved(rows: int = 8192) -> float:
    return 4.0 * (rows * COLS + COLS + rows * COLS)
