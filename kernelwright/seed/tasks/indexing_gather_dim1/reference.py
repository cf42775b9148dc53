import torch
import torch.nn as nn


class Model(nn.Module):
    """out[b, k, d] = x[b, index[b, k, d], d]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, index)


def get_inputs():
    b, n, k, d = 6, 513, 301, 70
    x = torch.randn(b, n, d)
    index = torch.randint(0, n, (b, k, d), dtype=torch.int64)
    return [x, index]


def get_init_inputs():
    return []
