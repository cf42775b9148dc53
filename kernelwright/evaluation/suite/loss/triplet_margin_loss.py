"""Triplet margin loss with L2 distances: mean(max(||a - p + eps|| - ||a - n + eps|| + margin, 0))."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"
DTYPE = "float32"
SHAPES = [
    {"batch": 8192, "dim": 256},
    {"batch": 1000, "dim": 129},
    {"batch": 64, "dim": 8191},
]


class Model(nn.Module):
    def __init__(self, margin: float):
        super().__init__()
        self.margin = margin

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=2.0, eps=1e-6,
                                     reduction="mean")


def get_inputs(batch: int = 8192, dim: int = 256):
    anchor = torch.randn(batch, dim)
    # per-sample positive noise in [0.5, 1.5) against unit negative noise: about half the
    # triplets violate the margin, whatever the dimension
    noise = torch.rand(batch, 1) + 0.5
    positive = anchor + noise * torch.randn(batch, dim)
    negative = anchor + torch.randn(batch, dim)
    return [anchor, positive, negative]


def get_init_inputs():
    return [1.0]


def flops(batch: int = 8192, dim: int = 256) -> float:
    # two distances: subtract, add eps, square, accumulate (4 each per element); then sqrt, hinge, mean
    return 8.0 * batch * dim + 6.0 * batch


def bytes_moved(batch: int = 8192, dim: int = 256) -> float:
    return 4.0 * (3 * batch * dim + 1)
