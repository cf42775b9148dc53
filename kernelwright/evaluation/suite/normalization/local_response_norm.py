"""Local response normalization across channels: y = x / (k + alpha * mean_{window of size c} x^2) ** beta."""
import torch
import torch.nn as nn

CATEGORY = "normalization"
DTYPE = "float32"
SHAPES = [
    {"batch": 16, "channels": 48, "height": 56, "width": 56},
    {"batch": 3, "channels": 29, "height": 45, "width": 67},
    {"batch": 64, "channels": 96, "height": 14, "width": 14},
]


class Model(nn.Module):
    def __init__(self, size: int, alpha: float, beta: float, k: float):
        super().__init__()
        self.lrn = nn.LocalResponseNorm(size, alpha=alpha, beta=beta, k=k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lrn(x)


def get_inputs(batch: int = 16, channels: int = 48, height: int = 56, width: int = 56):
    return [torch.randn(batch, channels, height, width) * 2.0]


def get_init_inputs():
    # a large alpha so that the normalization visibly depends on the neighbourhood
    return [5, 0.5, 0.75, 1.0]


def flops(batch: int = 16, channels: int = 48, height: int = 56, width: int = 56) -> float:
    # square, 5-wide window sum, scale and offset, pow (log + exp + mul), divide
    return 12.0 * batch * channels * height * width


def bytes_moved(batch: int = 16, channels: int = 48, height: int = 56, width: int = 56) -> float:
    n = batch * channels * height * width
    return 4.0 * (n + n)
