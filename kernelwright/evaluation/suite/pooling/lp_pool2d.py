"""Power-average (L2) 2-D pooling: y = sqrt(sum over a 3x3 window, stride 2, of x^2), floor output size."""
import torch
import torch.nn as nn

CATEGORY = "pooling"
DTYPE = "float32"
SHAPES = [
    {"batch": 16, "channels": 64, "height": 64, "width": 64},
    {"batch": 3, "channels": 29, "height": 51, "width": 38},
    {"batch": 128, "channels": 32, "height": 15, "width": 15},
]


class Model(nn.Module):
    def __init__(self, norm_type: float, kernel_size: int, stride: int):
        super().__init__()
        self.pool = nn.LPPool2d(norm_type, kernel_size, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs(batch: int = 16, channels: int = 64, height: int = 64, width: int = 64):
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [2.0, 3, 2]


def _out(size: int) -> int:
    return (size - 3) // 2 + 1


def flops(batch: int = 16, channels: int = 64, height: int = 64, width: int = 64) -> float:
    # per output: 9 squares, 8 adds, one sqrt
    return 18.0 * batch * channels * _out(height) * _out(width)


def bytes_moved(batch: int = 16, channels: int = 64, height: int = 64, width: int = 64) -> float:
    return 4.0 * (batch * channels * height * width + batch * channels * _out(height) * _out(width))
