import torch
import torch.nn as nn


class Model(nn.Module):
    """Dilated 1-D convolution with bias (stride 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, padding: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=padding,
                              dilation=dilation, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(5, 10, 250)]


def get_init_inputs():
    return [10, 18, 5, 3, 3]
