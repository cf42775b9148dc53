"""Block-diagonal (grouped) linear layer: out[t, g, :] = x[t, g, :] @ W[g] + b[g] for G independent groups."""
import torch
import torch.nn as nn

CATEGORY = "matmul"
DTYPE = "float32"
GROUPS, DIN, DOUT = 8, 256, 192
SHAPES = [
    {"tokens": 4096},
    {"tokens": 1531},
    {"tokens": 257},
]


class Model(nn.Module):
    def __init__(self, groups: int, din: int, dout: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(groups, din, dout) / din**0.5)
        self.bias = nn.Parameter(torch.randn(groups, dout) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("tgi,gio->tgo", x, self.weight) + self.bias


def get_inputs(tokens: int = 4096):
    return [torch.randn(tokens, GROUPS, DIN)]


def get_init_inputs():
    return [GROUPS, DIN, DOUT]


def flops(tokens: int = 4096) -> float:
    return 2.0 * tokens * GROUPS * DIN * DOUT + tokens * GROUPS * DOUT


def bytes_moved(tokens: int = 4096) -> float:
    return 4.0 * (tokens * GROUPS * DIN + GROUPS * DIN * DOUT + GROUPS * DOUT + tokens * GROUPS * DOUT)
