"""Adaptive 2-D max pooling to a 7x7 grid from spatial sizes that 7 does not divide (overlapping windows)."""
import torch
import torch.nn as nn

CATEGORY = "pooling"
DTYPE = "float32"
SHAPES = [
    {"batch": 32, "channels": 64, "height": 45, "width": 45},
    {"batch": 5, "channels": 37, "height": 29, "width": 50},
    {"batch": 8, "channels": 256, "height": 20, "width": 17},
]


class Model(nn.Module):
    def __init__(self, out_size: int):
        super().__init__()
        self.pool = nn.AdaptiveMaxPool2d((out_size, out_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs(batch: int = 32, channels: int = 64, height: int = 45, width: int = 45):
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [7]


def _window_total(size: int, out: int = 7) -> int:
    # sum of adaptive window lengths: [floor(i * size / out), ceil((i + 1) * size / out))
    return sum(-(-(i + 1) * size // out) - (i * size // out) for i in range(out))


def flops(batch: int = 32, channels: int = 64, height: int = 45, width: int = 45) -> float:
    # one compare per window element
    return float(batch * channels * _window_total(height) * _window_total(width))


def bytes_moved(batch: int = 32, channels: int = 64, height: int = 45, width: int = 45) -> float:
    return 4.0 * (batch * channels * height * width + batch * channels * 49)
