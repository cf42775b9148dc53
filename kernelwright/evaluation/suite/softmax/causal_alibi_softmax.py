"""Causal softmax of attention scores with ALiBi: softmax_j(scale * s[b,h,i,j] + slope[h] * (j - i)), j <= i."""
import torch
import torch.nn as nn

CATEGORY = "softmax"
DTYPE = "float32"
HEADS = 8
SHAPES = [
    {"batch": 4, "seq": 512},
    {"batch": 3, "seq": 397},
    {"batch": 1, "seq": 1000},
]


class Model(nn.Module):
    def __init__(self, heads: int, scale: float):
        super().__init__()
        self.scale = scale
        # geometric ALiBi slopes 2^(-8 (h + 1) / heads)
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)])
        self.register_buffer("slopes", slopes)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        length = scores.shape[-1]
        pos = torch.arange(length, device=scores.device)
        rel = (pos.view(1, -1) - pos.view(-1, 1)).to(scores.dtype)  # j - i
        logits = scores * self.scale + self.slopes.view(-1, 1, 1) * rel
        logits = logits.masked_fill(rel > 0, float("-inf"))
        return torch.softmax(logits, dim=-1)


def get_inputs(batch: int = 4, seq: int = 512):
    return [torch.randn(batch, HEADS, seq, seq) * 4.0]


def get_init_inputs():
    return [HEADS, 0.125 ** 0.5]


def flops(batch: int = 4, seq: int = 512) -> float:
    # on the causal half: scale, bias (mul + add), max, subtract, exp, sum, divide
    return 8.0 * batch * HEADS * seq * (seq + 1) / 2


def bytes_moved(batch: int = 4, seq: int = 512) -> float:
    # only the causal half of the scores must be read; the whole output is written
    return 4.0 * (batch * HEADS * seq * (seq + 1) / 2 + batch * HEADS * seq * seq + HEADS)
