import torch
import torch.nn as nn


class Model(nn.Module):
    """y = clamp(x * scale, -65504, 65504).to(float16): a scaled cast that saturates instead of overflowing to inf."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x * self.scale, -65504.0, 65504.0).to(torch.float16)


def get_inputs():
    # |x * scale| passes 65504 at |x| > ~341, about 3.4 sigma here, so some elements saturate.
    return [torch.randn(33, 2047) * 100.0]


def get_init_inputs():
    return [192.0]
