import torch
import torch.nn as nn


class Model(nn.Module):
    """LeakyReLU: y = x if x >= 0 else slope * x."""

    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(8, 333, 97)]


def get_init_inputs():
    return [0.07]
