"""Spatial pyramid max pooling: adaptive max pools to 1x1, 2x2 and 4x4, flattened and concatenated to (N, 21 C)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "pooling"
DTYPE = "float32"
LEVELS = (1, 2, 4)
SHAPES = [
    {"batch": 32, "channels": 128, "height": 32, "width": 32},
    {"batch": 3, "channels": 77, "height": 23, "width": 41},
    {"batch": 256, "channels": 64, "height": 7, "width": 7},
]


class Model(nn.Module):
    def __init__(self, levels):
        super().__init__()
        self.levels = [int(v) for v in levels]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [F.adaptive_max_pool2d(x, level).flatten(1) for level in self.levels]
        return torch.cat(parts, dim=1)


def get_inputs(batch: int = 32, channels: int = 128, height: int = 32, width: int = 32):
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [list(LEVELS)]


def _window_total(size: int, out: int) -> int:
    return sum(-(-(i + 1) * size // out) - (i * size // out) for i in range(out))


def flops(batch: int = 32, channels: int = 128, height: int = 32, width: int = 32) -> float:
    # one compare per element of every window of every level
    return float(sum(batch * channels * _window_total(height, v) * _window_total(width, v) for v in LEVELS))


def bytes_moved(batch: int = 32, channels: int = 128, height: int = 32, width: int = 32) -> float:
    outs = sum(v * v for v in LEVELS)
    return 4.0 * (batch * channels * height * width + batch * channels * outs)
