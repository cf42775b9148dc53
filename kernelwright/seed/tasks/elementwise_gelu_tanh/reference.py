import torch
import torch.nn as nn


class Model(nn.Module):
    """GELU (tanh approximation): y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(12, 257, 131) * 2.0]


def get_init_inputs():
    return []
