"""Softsign on float16 data: y = x / (1 + |x|), float16 in and out."""
import torch
import torch.nn as nn

CATEGORY = "elementwise"
DTYPE = "float16"
SHAPES = [
    {"rows": 8192, "cols": 2048},
    {"rows": 777, "cols": 3001},
    {"rows": 65536, "cols": 160},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (1.0 + x.abs())


def get_inputs(rows: int = 8192, cols: int = 2048):
    return [(torch.randn(rows, cols) * 4.0).to(torch.float16)]


def get_init_inputs():
    return []


def flops(rows: int = 8192, cols: int = 2048) -> float:
    # abs, add, divide
    return 3.0 * rows * cols


def bytes_moved(rows: int = 8192, cols: int = 2048) -> float:
    return 2.0 * (rows * cols + rows * cols)
