import torch
import torch.nn as nn


class Model(nn.Module):
    """A fully connected layer y = x W^T + b over the last dimension of x."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def get_inputs():
    return [torch.randn(4, 37, 300)]


def get_init_inputs():
    return [300, 170]
