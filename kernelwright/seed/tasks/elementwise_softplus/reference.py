import torch
import torch.nn as nn


class Model(nn.Module):
    """Softplus: y = log(1 + exp(beta * x)) / beta, or x where beta * x > threshold."""

    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x, beta=self.beta, threshold=self.threshold)


def get_inputs():
    return [torch.randn(7, 389, 211) * 4.0]


def get_init_inputs():
    return [1.6, 12.0]
