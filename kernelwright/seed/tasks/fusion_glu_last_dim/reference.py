import torch
import torch.nn as nn


class Model(nn.Module):
    """GLU over the last dim: x = [a, g] (halves) -> a * sigmoid(g)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, g = x.chunk(2, dim=-1)
        return a * torch.sigmoid(g)


def get_inputs():
    return [torch.randn(32, 77, 626) * 2.0]


def get_init_inputs():
    return []
