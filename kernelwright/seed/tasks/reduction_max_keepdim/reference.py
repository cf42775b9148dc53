import torch
import torch.nn as nn


class Model(nn.Module):
    """Max over one dimension with keepdim=True; returns only the values."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim, keepdim=True).values


def get_inputs():
    return [torch.randn(24, 517, 40)]


def get_init_inputs():
    return [1]
