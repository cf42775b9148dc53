import torch
import torch.nn as nn


class Model(nn.Module):
    """1-D convolution (stride 1, zero padding) with bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, padding: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 12, 301)]


def get_init_inputs():
    return [12, 20, 5, 2]
