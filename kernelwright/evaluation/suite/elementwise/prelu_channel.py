"""Parametric ReLU on NCHW data with one learned negative slope per channel."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "elementwise"
DTYPE = "float32"
SHAPES = [
    {"batch": 16, "height": 64, "width": 64},
    {"batch": 3, "height": 57, "width": 91},
    {"batch": 2, "height": 129, "width": 257},
]


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        # slopes spread over [-0.3, 0.7] so that each channel's negative branch differs
        self.weight = nn.Parameter(torch.rand(channels) - 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.prelu(x, self.weight)


def get_inputs(batch: int = 16, height: int = 64, width: int = 64):
    return [torch.randn(batch, 64, height, width)]


def get_init_inputs():
    return [64]


def flops(batch: int = 16, height: int = 64, width: int = 64) -> float:
    # compare, multiply (select)
    return 2.0 * batch * 64 * height * width


def bytes_moved(batch: int = 16, height: int = 64, width: int = 64) -> float:
    n = batch * 64 * height * width
    return 4.0 * (2 * n + 64)
