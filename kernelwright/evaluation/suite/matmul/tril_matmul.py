"""Lower-triangular times dense: C = tril(A) @ B, A square (m, m), B (m, n); A's upper triangle is ignored."""
import torch
import torch.nn as nn

CATEGORY = "matmul"
DTYPE = "float32"
SHAPES = [
    {"m": 2048, "n": 2048},
    {"m": 1000, "n": 777},
    {"m": 4096, "n": 192},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.tril(a) @ b


def get_inputs(m: int = 2048, n: int = 2048):
    # A is dense: a kernel that forgets to mask the upper triangle gets a visibly wrong answer
    # (scaled by 1 / sqrt(m) so that the outputs stay of order one)
    return [torch.randn(m, m) / m**0.5, torch.randn(m, n)]


def get_init_inputs():
    return []


def flops(m: int = 2048, n: int = 2048) -> float:
    # only the m (m + 1) / 2 lower-triangle entries contribute: one multiply-add each per output column
    return 2.0 * (m * (m + 1) / 2) * n


def bytes_moved(m: int = 2048, n: int = 2048) -> float:
    return 4.0 * (m * (m + 1) / 2 + m * n + m * n)
