import torch
import torch.nn as nn


class Model(nn.Module):
    """out = torch.flip(x, dims=(dim,))."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flip(x, dims=(self.dim,))


def get_inputs():
    return [torch.randn(10, 263, 97)]


def get_init_inputs():
    return [1]
