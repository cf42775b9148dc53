import torch
import torch.nn as nn


class Model(nn.Module):
    """3-D average pooling with zero padding; padded positions count in the divisor."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool3d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(2, 8, 15, 22, 19)]


def get_init_inputs():
    return [3, 2, 1]
