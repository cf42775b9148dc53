import torch
import torch.nn as nn


class Model(nn.Module):
    """2-D convolution, 3x3 kernel, stride 1, zero padding, with bias (NCHW)."""

    def __init__(self, in_channels: int, out_channels: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 8, 45, 61)]


def get_init_inputs():
    return [8, 16, 1]
