"""Soft shrinkage: y = x - lambd if x > lambd, x + lambd if x < -lambd, else 0."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "elementwise"
DTYPE = "float32"
SHAPES = [
    {"batch": 8, "seq": 512, "hidden": 1024},
    {"batch": 5, "seq": 333, "hidden": 771},
    {"batch": 1, "seq": 4097, "hidden": 130},
]


class Model(nn.Module):
    def __init__(self, lambd: float):
        super().__init__()
        self.lambd = lambd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softshrink(x, self.lambd)


def get_inputs(batch: int = 8, seq: int = 512, hidden: int = 1024):
    return [torch.randn(batch, seq, hidden) * 1.5]


def get_init_inputs():
    return [0.6]


def flops(batch: int = 8, seq: int = 512, hidden: int = 1024) -> float:
    # two compares, one add/subtract
    return 3.0 * batch * seq * hidden


def bytes_moved(batch: int = 8, seq: int = 512, hidden: int = 1024) -> float:
    n = batch * seq * hidden
    return 4.0 * (n + n)
