import torch
import torch.nn as nn


class Model(nn.Module):
    """SiLU / swish on float16: y = x * sigmoid(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x)


def get_inputs():
    return [(torch.randn(1999, 515) * 3.0).to(torch.float16)]


def get_init_inputs():
    return []
