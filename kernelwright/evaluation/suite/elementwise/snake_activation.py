"""Snake activation with a learned frequency per channel: y = x + sin(a[c] * x)^2 / a[c] on (batch, channels, time)."""
import torch
import torch.nn as nn

CATEGORY = "elementwise"
DTYPE = "float32"
CHANNELS = 96
SHAPES = [
    {"batch": 16, "time": 4096},
    {"batch": 3, "time": 3001},
    {"batch": 128, "time": 257},
]


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        # frequencies in [0.5, 3.0)
        self.alpha = nn.Parameter(torch.rand(channels) * 2.5 + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha.view(1, -1, 1)
        return x + torch.sin(a * x).pow(2) / a


def get_inputs(batch: int = 16, time: int = 4096):
    return [torch.randn(batch, CHANNELS, time) * 2.0]


def get_init_inputs():
    return [CHANNELS]


def flops(batch: int = 16, time: int = 4096) -> float:
    # multiply, sin, square, divide, add
    return 5.0 * batch * CHANNELS * time


def bytes_moved(batch: int = 16, time: int = 4096) -> float:
    n = batch * CHANNELS * time
    return 4.0 * (n + CHANNELS + n)
