import torch
import torch.nn as nn


class Model(nn.Module):
    """Strided 2-D convolution with a rectangular kernel and per-axis stride/padding, with bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(3, 6, 67, 53)]


def get_init_inputs():
    return [6, 14, (3, 5), (2, 3), (1, 2)]
