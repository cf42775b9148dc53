import torch
import torch.nn as nn


class Model(nn.Module):
    """Sums the input over one dimension (the middle one of a 3-D tensor), dropping it."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(16, 777, 130)]


def get_init_inputs():
    return [1]
