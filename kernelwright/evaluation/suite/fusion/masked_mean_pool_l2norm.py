"""Sentence embedding: mean of the hidden states at unmasked positions, then L2-normalized: (B, T, D) -> (B, D)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "fusion"
DTYPE = "float32"
SHAPES = [
    {"batch": 64, "seq": 256, "dim": 256},
    {"batch": 7, "seq": 333, "dim": 768},
    {"batch": 512, "seq": 32, "dim": 384},
]


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)
        return F.normalize(pooled, p=2.0, dim=-1, eps=self.eps)


def get_inputs(batch: int = 64, seq: int = 256, dim: int = 256):
    # a shared direction plus noise, so that padded positions (drawn differently) would shift the mean
    hidden = torch.randn(batch, seq, dim) + 0.3 * torch.randn(1, 1, dim)
    lengths = torch.randint(1, seq + 1, (batch, 1))
    mask = torch.arange(seq).view(1, -1) < lengths  # bool, True = real token
    hidden = torch.where(mask.unsqueeze(-1), hidden, hidden + 5.0)
    return [hidden, mask]


def get_init_inputs():
    return [1e-12]


def flops(batch: int = 64, seq: int = 256, dim: int = 256) -> float:
    # masked accumulate (2 per element), then divide, square, sum, sqrt, divide per output
    return 2.0 * batch * seq * dim + 4.0 * batch * dim


def bytes_moved(batch: int = 64, seq: int = 256, dim: int = 256) -> float:
    # every hidden state read (a kernel may skip padded ones), bool mask, output
    return 4.0 * (batch * seq * dim + batch * dim) + 1.0 * batch * seq
