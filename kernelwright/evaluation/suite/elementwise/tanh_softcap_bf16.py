"""Logit soft-capping on bfloat16: y = cap * tanh(x / cap), squashing values smoothly into (-cap, cap)."""
import torch
import torch.nn as nn

CATEGORY = "elementwise"
DTYPE = "bfloat16"
SHAPES = [
    {"rows": 8192, "cols": 2048},
    {"rows": 1001, "cols": 3001},
    {"rows": 64, "cols": 50257},
]


class Model(nn.Module):
    def __init__(self, cap: float):
        super().__init__()
        self.cap = cap

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cap * torch.tanh(x / self.cap)


def get_inputs(rows: int = 8192, cols: int = 2048):
    # spread comparable to the cap: both the near-linear and the saturated regions occur
    return [(torch.randn(rows, cols) * 25.0).to(torch.bfloat16)]


def get_init_inputs():
    return [30.0]


def flops(rows: int = 8192, cols: int = 2048) -> float:
    # divide, tanh, multiply
    return 3.0 * rows * cols


def bytes_moved(rows: int = 8192, cols: int = 2048) -> float:
    return 2.0 * (rows * cols + rows * cols)
