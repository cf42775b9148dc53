"""Attention softmax over keys with per-sample valid lengths: keys j >= length[b] get probability 0."""
import torch
import torch.nn as nn

CATEGORY = "softmax"
DTYPE = "float32"
SHAPES = [
    {"batch": 8, "heads": 16, "q": 256, "k": 256},
    {"batch": 5, "heads": 7, "q": 97, "k": 333},
    {"batch": 32, "heads": 4, "q": 1, "k": 4097},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        keys = torch.arange(scores.shape[-1], device=scores.device)
        invalid = keys.view(1, -1) >= lengths.view(-1, 1)  # (batch, k)
        logits = scores.masked_fill(invalid[:, None, None, :], float("-inf"))
        return torch.softmax(logits, dim=-1)


def get_inputs(batch: int = 8, heads: int = 16, q: int = 256, k: int = 256):
    scores = torch.randn(batch, heads, q, k) * 3.0
    lengths = torch.randint(1, k + 1, (batch,), dtype=torch.int64)
    lengths[0] = k  # at least one unmasked sample
    return [scores, lengths]


def get_init_inputs():
    return []


def flops(batch: int = 8, heads: int = 16, q: int = 256, k: int = 256) -> float:
    # max, subtract, exp, sum, divide on the valid keys (on average (k + 1) / 2 of them)
    return 5.0 * batch * heads * q * (k + 1) / 2


def bytes_moved(batch: int = 8, heads: int = 16, q: int = 256, k: int = 256) -> float:
    # valid scores read (on average half), whole output written, lengths read
    return 4.0 * (batch * heads * q * (k + 1) / 2 + batch * heads * q * k) + 8.0 * batch
