"""Diffusion-style block: y = silu(groupnorm(x) * (1 + scale[b, c]) + shift[b, c]), 32 groups over 128 channels."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "fusion"
DTYPE = "float32"
CHANNELS, GROUPS = 128, 32
SHAPES = [
    {"batch": 8, "height": 64, "width": 64},
    {"batch": 3, "height": 27, "width": 45},
    {"batch": 32, "height": 16, "width": 16},
]


class Model(nn.Module):
    def __init__(self, groups: int, channels: int, eps: float):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=eps, affine=True)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.2 * torch.randn(channels))
            self.norm.bias.copy_(0.2 * torch.randn(channels))

    def forward(self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        h = h * (1.0 + scale[:, :, None, None]) + shift[:, :, None, None]
        return F.silu(h)


def get_inputs(batch: int = 8, height: int = 64, width: int = 64):
    x = torch.randn(batch, CHANNELS, height, width) * 1.5 + 0.3
    scale = torch.randn(batch, CHANNELS) * 0.3
    shift = torch.randn(batch, CHANNELS) * 0.5
    return [x, scale, shift]


def get_init_inputs():
    return [GROUPS, CHANNELS, 1e-5]


def flops(batch: int = 8, height: int = 64, width: int = 64) -> float:
    # group stats (3), normalize + affine (4), modulate (2), silu (exp, add, divide, multiply: 4)
    return 13.0 * batch * CHANNELS * height * width


def bytes_moved(batch: int = 8, height: int = 64, width: int = 64) -> float:
    n = batch * CHANNELS * height * width
    return 4.0 * (2 * n + 2 * batch * CHANNELS + 2 * CHANNELS)
