"""Gated residual unit: [g, v] = x W^T + b (one linear, D -> 2D); y = x + sigmoid(g) * tanh(v)."""
import torch
import torch.nn as nn

CATEGORY = "fusion"
DTYPE = "float32"
DIM = 512
SHAPES = [
    {"tokens": 8192},
    {"tokens": 1001},
    {"tokens": 4097},
]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, 2 * dim, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g, v = self.proj(x).chunk(2, dim=-1)
        return x + torch.sigmoid(g) * torch.tanh(v)


def get_inputs(tokens: int = 8192):
    return [torch.randn(tokens, DIM)]


def get_init_inputs():
    return [DIM]


def flops(tokens: int = 8192) -> float:
    # GEMM (2 * T * D * 2D), bias (2 * T * D), sigmoid (3), tanh (1), multiply, add
    return 2.0 * tokens * DIM * 2 * DIM + 2.0 * tokens * DIM + 6.0 * tokens * DIM


def bytes_moved(tokens: int = 8192) -> float:
    return 4.0 * (tokens * DIM + 2 * DIM * DIM + 2 * DIM + tokens * DIM)
