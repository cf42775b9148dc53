import torch
import torch.nn as nn


class Model(nn.Module):
    """Masked softmax over the last dimension; mask True = keep, False = excluded (-inf)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x.masked_fill(~mask, float("-inf")), dim=-1)


def get_inputs():
    x = torch.randn(4, 12, 97, 97) * 3.0
    mask = torch.rand(4, 12, 97, 97) > 0.35
    mask[..., 5] = True  # every row keeps at least one position (a fully masked row would be NaN)
    return [x, mask]


def get_init_inputs():
    return []
