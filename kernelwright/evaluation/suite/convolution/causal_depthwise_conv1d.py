"""Causal depthwise 1-D conv: y[b, c, t] = bias[c] + sum_k w[c, k] * x[b, c, t - (K - 1) + k], zero before t = 0."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "convolution"
DTYPE = "float32"
CHANNELS, K = 256, 4
SHAPES = [
    {"batch": 8, "length": 2048},
    {"batch": 3, "length": 1001},
    {"batch": 64, "length": 129},
]


class Model(nn.Module):
    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.weight = nn.Parameter(torch.randn(channels, 1, kernel_size) / kernel_size**0.5)
        self.bias = nn.Parameter(torch.randn(channels) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, (self.kernel_size - 1, 0))  # left padding only: no look-ahead
        return F.conv1d(x, self.weight, self.bias, groups=x.shape[1])


def get_inputs(batch: int = 8, length: int = 2048):
    return [torch.randn(batch, CHANNELS, length)]


def get_init_inputs():
    return [CHANNELS, K]


def flops(batch: int = 8, length: int = 2048) -> float:
    return 2.0 * batch * CHANNELS * length * K + batch * CHANNELS * length


def bytes_moved(batch: int = 8, length: int = 2048) -> float:
    n = batch * CHANNELS * length
    return 4.0 * (n + CHANNELS * K + CHANNELS + n)
