"""Second-moment (Gram) matrix of the columns of X: G = X^T X / n for X of shape (n, d), output (d, d)."""
import torch
import torch.nn as nn

CATEGORY = "matmul"
DTYPE = "float32"
SHAPES = [
    {"n": 8192, "d": 1024},
    {"n": 3001, "d": 777},
    {"n": 65536, "d": 96},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.t() @ x) / x.shape[0]


def get_inputs(n: int = 8192, d: int = 1024):
    return [torch.randn(n, d)]


def get_init_inputs():
    return []


def flops(n: int = 8192, d: int = 1024) -> float:
    # the full product (exploiting symmetry could halve it) and the scaling
    return 2.0 * n * d * d + d * d


def bytes_moved(n: int = 8192, d: int = 1024) -> float:
    return 4.0 * (n * d + d * d)
