import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2-D convolution: each channel is convolved with its own KxK filter, plus bias."""

    def __init__(self, channels: int, kernel_size: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=padding, groups=channels, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(3, 24, 50, 37)]


def get_init_inputs():
    return [24, 5, 2]
