"""Per-row range: y[r] = max_j x[r, j] - min_j x[r, j]."""
import torch
import torch.nn as nn

CATEGORY = "reduction"
DTYPE = "float32"
SHAPES = [
    {"rows": 4096, "cols": 2048},
    {"rows": 555, "cols": 3333},
    {"rows": 131072, "cols": 33},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=-1) - torch.amin(x, dim=-1)


def get_inputs(rows: int = 4096, cols: int = 2048):
    # a per-row spread makes the ranges differ strongly between rows
    spread = torch.rand(rows, 1) * 4.0 + 0.25
    return [torch.randn(rows, cols) * spread]


def get_init_inputs():
    return []


def flops(rows: int = 4096, cols: int = 2048) -> float:
    # one max-compare and one min-compare per element, one subtract per row
    return 2.0 * rows * cols + rows


def bytes_moved(rows: int = 4096, cols: int = 2048) -> float:
    return 4.0 * (rows * cols + rows)
