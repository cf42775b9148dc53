"""Bucket index of every value among 255 sorted boundaries: out = number of boundaries strictly below x (int64)."""
import torch
import torch.nn as nn

CATEGORY = "indexing"
DTYPE = "float32"
NUM_BOUNDARIES = 255
SHAPES = [
    {"rows": 4096, "cols": 1024},
    {"rows": 3001, "cols": 555},
    {"rows": 64, "cols": 100003},
]


class Model(nn.Module):
    def __init__(self, num_boundaries: int):
        super().__init__()
        # unevenly spaced, strictly increasing boundaries concentrated near zero
        b = torch.sort(torch.randn(num_boundaries) * 1.5).values
        self.register_buffer("boundaries", b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bucketize(x, self.boundaries, right=False)


def get_inputs(rows: int = 4096, cols: int = 1024):
    return [torch.randn(rows, cols) * 2.0]


def get_init_inputs():
    return [NUM_BOUNDARIES]


def flops(rows: int = 4096, cols: int = 1024) -> float:
    # binary search: log2(256) = 8 compares per value
    return 8.0 * rows * cols


def bytes_moved(rows: int = 4096, cols: int = 1024) -> float:
    # float32 values in, int64 indices out, boundaries once
    return 4.0 * rows * cols + 8.0 * rows * cols + 4.0 * NUM_BOUNDARIES
