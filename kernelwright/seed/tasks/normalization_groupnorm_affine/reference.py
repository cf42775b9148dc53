import torch
import torch.nn as nn


class Model(nn.Module):
    """Group normalization: statistics over (channels of a group) x spatial, per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(num_channels))
        self.bias = nn.Parameter(torch.randn(num_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(4, 48, 21, 23) * 2.0 - 0.7]


def get_init_inputs():
    return [6, 48, 1e-5]
