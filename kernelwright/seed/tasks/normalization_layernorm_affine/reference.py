import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last dimension with an affine transform.

    The weight and bias are drawn at random so that a misapplied affine step is visible.
    """

    def __init__(self, normalized_size: int, eps: float):
        super().__init__()
        self.normalized_size = normalized_size
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(normalized_size))
        self.bias = nn.Parameter(torch.randn(normalized_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(
            x, (self.normalized_size,), self.weight, self.bias, self.eps
        )


def get_inputs():
    return [torch.randn(32, 50, 777) * 1.5 + 0.3]


def get_init_inputs():
    return [777, 1e-5]
