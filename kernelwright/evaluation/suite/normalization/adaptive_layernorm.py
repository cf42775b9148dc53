"""Adaptive layer norm: y = layernorm(x) * (1 + scale[b]) + shift[b], no learned affine, per-sample modulation."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "normalization"
DTYPE = "float32"
SHAPES = [
    {"batch": 8, "seq": 1024, "dim": 512},
    {"batch": 3, "seq": 777, "dim": 1000},
    {"batch": 64, "seq": 65, "dim": 1536},
]


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        h = F.layer_norm(x, (x.shape[-1],), eps=self.eps)
        return h * (1.0 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def get_inputs(batch: int = 8, seq: int = 1024, dim: int = 512):
    x = torch.randn(batch, seq, dim) * 2.0 + 0.5
    scale = torch.randn(batch, dim) * 0.5
    shift = torch.randn(batch, dim)
    return [x, scale, shift]


def get_init_inputs():
    return [1e-6]


def flops(batch: int = 8, seq: int = 1024, dim: int = 512) -> float:
    # mean, variance (2), subtract, multiply by rstd, modulate (mul + add): ~7 per element
    return 7.0 * batch * seq * dim


def bytes_moved(batch: int = 8, seq: int = 1024, dim: int = 512) -> float:
    n = batch * seq * dim
    return 4.0 * (2 * n + 2 * batch * dim)
