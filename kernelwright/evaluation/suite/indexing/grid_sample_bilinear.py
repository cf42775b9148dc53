"""Bilinear grid sampling (zeros padding, align_corners=False) of NCHW images at per-pixel (x, y) locations."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "indexing"
DTYPE = "float32"
SHAPES = [
    {"batch": 8, "channels": 32, "height": 128, "width": 128},
    {"batch": 3, "channels": 7, "height": 61, "width": 93},
    {"batch": 1, "channels": 64, "height": 257, "width": 127},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, image: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def get_inputs(batch: int = 8, channels: int = 32, height: int = 128, width: int = 128):
    image = torch.randn(batch, channels, height, width)
    # a random near-identity affine warp per image plus jitter; some samples fall outside the image
    theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]) + 0.15 * torch.randn(batch, 2, 3)
    grid = F.affine_grid(theta, [batch, channels, height, width], align_corners=False)
    grid = grid + 0.02 * torch.randn_like(grid)
    return [image, grid]


def get_init_inputs():
    return []


def flops(batch: int = 8, channels: int = 32, height: int = 128, width: int = 128) -> float:
    # per output pixel: unnormalize and weights (~10), per channel 4 multiplies and 3 adds
    return batch * height * width * (10.0 + 7.0 * channels)


def bytes_moved(batch: int = 8, channels: int = 32, height: int = 128, width: int = 128) -> float:
    n = batch * channels * height * width
    return 4.0 * (n + batch * height * width * 2 + n)
