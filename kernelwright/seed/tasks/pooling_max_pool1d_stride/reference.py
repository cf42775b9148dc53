import torch
import torch.nn as nn


class Model(nn.Module):
    """1-D max pooling with stride, padding and dilation (floor output length)."""

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(6, 20, 301)]


def get_init_inputs():
    return [4, 3, 1, 2]
