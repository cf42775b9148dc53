import torch
import torch.nn as nn


class Model(nn.Module):
    """1x1 convolution with bias: mixes channels independently at every pixel."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 48, 33, 29)]


def get_init_inputs():
    return [48, 40]
