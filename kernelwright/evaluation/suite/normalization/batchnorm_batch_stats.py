"""Training-mode batch normalization on NCHW: per-channel mean and biased variance over (N, H, W), then affine."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "normalization"
DTYPE = "float32"
CHANNELS = 32
SHAPES = [
    {"batch": 32, "height": 64, "width": 64},
    {"batch": 5, "height": 37, "width": 53},
    {"batch": 256, "height": 7, "width": 7},
]


class Model(nn.Module):
    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # statistics of this batch; no running buffers are read or written
        return F.batch_norm(x, None, None, self.weight, self.bias, training=True, eps=self.eps)


def get_inputs(batch: int = 32, height: int = 64, width: int = 64):
    # every channel has its own offset and scale, so the statistics matter
    shift = torch.randn(1, CHANNELS, 1, 1) * 3.0
    scale = torch.rand(1, CHANNELS, 1, 1) * 2.0 + 0.5
    return [torch.randn(batch, CHANNELS, height, width) * scale + shift]


def get_init_inputs():
    return [CHANNELS, 1e-5]


def flops(batch: int = 32, height: int = 64, width: int = 64) -> float:
    # sum, sum of squares (2), subtract, scale, shift (3) per element
    return 6.0 * batch * CHANNELS * height * width


def bytes_moved(batch: int = 32, height: int = 64, width: int = 64) -> float:
    n = batch * CHANNELS * height * width
    return 4.0 * (2 * n + 2 * CHANNELS)
