import torch
import torch.nn as nn


class Model(nn.Module):
    """out = sin(a) * cos(b) + k * atan2(a, b) for equal-shaped a and b."""

    def __init__(self, k: float):
        super().__init__()
        self.k = k

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.sin(a) * torch.cos(b) + self.k * torch.atan2(a, b)


def get_inputs():
    shape = (3, 511, 389)
    return [torch.randn(shape) * 3.0, torch.randn(shape) * 3.0]


def get_init_inputs():
    return [0.25]
