"""Entropy of the softmax distribution of each row: H[r] = -sum_j p[r, j] * log p[r, j], p = softmax(x[r])."""
import torch
import torch.nn as nn

CATEGORY = "softmax"
DTYPE = "float32"
SHAPES = [
    {"rows": 8192, "cols": 1024},
    {"rows": 777, "cols": 3001},
    {"rows": 128, "cols": 32000},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(x, dim=-1)
        return -(logp.exp() * logp).sum(dim=-1)


def get_inputs(rows: int = 8192, cols: int = 1024):
    # per-row temperatures from peaked to flat, so the entropies span a wide range
    temperature = torch.rand(rows, 1) * 6.0 + 0.2
    return [torch.randn(rows, cols) * temperature]


def get_init_inputs():
    return []


def flops(rows: int = 8192, cols: int = 1024) -> float:
    # max, subtract, exp, sum, then p * logp and its sum
    return 7.0 * rows * cols


def bytes_moved(rows: int = 8192, cols: int = 1024) -> float:
    return 4.0 * (rows * cols + rows)
