import torch
import torch.nn as nn


class Model(nn.Module):
    """2-D max pooling (padding positions never win, floor output size)."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(4, 16, 63, 45)]


def get_init_inputs():
    return [3, 2, 1]
