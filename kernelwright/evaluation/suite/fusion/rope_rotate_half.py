"""Rotary position embedding at given positions: y = x * cos(p f) + rotate_half(x) * sin(p f), x (B, T, H, 128)."""
import torch
import torch.nn as nn

CATEGORY = "fusion"
DTYPE = "float32"
HEAD_DIM = 128
SHAPES = [
    {"batch": 4, "seq": 2048, "heads": 8},
    {"batch": 3, "seq": 777, "heads": 5},
    {"batch": 32, "seq": 129, "heads": 12},
]


class Model(nn.Module):
    def __init__(self, head_dim: int, base: float):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        self.register_buffer("inv_freq", inv_freq.to(torch.float32))

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        freqs = positions.to(torch.float32).unsqueeze(-1) * self.inv_freq  # (B, T, D/2)
        emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(2)  # (B, T, 1, D)
        x1, x2 = x.chunk(2, dim=-1)
        rotated = torch.cat((-x2, x1), dim=-1)
        return x * torch.cos(emb) + rotated * torch.sin(emb)


def get_inputs(batch: int = 4, seq: int = 2048, heads: int = 8):
    x = torch.randn(batch, seq, heads, HEAD_DIM)
    # each sequence starts at its own offset (as with a KV cache)
    positions = torch.randint(0, 512, (batch, 1)) + torch.arange(seq).view(1, -1)
    return [x, positions]


def get_init_inputs():
    return [HEAD_DIM, 10000.0]


def flops(batch: int = 4, seq: int = 2048, heads: int = 8) -> float:
    # angle, cos and sin per (b, t, frequency); two multiplies and one add per element of x
    return 3.0 * batch * seq * (HEAD_DIM // 2) + 3.0 * batch * seq * heads * HEAD_DIM


def bytes_moved(batch: int = 4, seq: int = 2048, heads: int = 8) -> float:
    n = batch * seq * heads * HEAD_DIM
    return 4.0 * (n + n + HEAD_DIM // 2) + 8.0 * batch * seq
