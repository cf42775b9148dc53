"""Per-column z-score of a (rows, cols) matrix: y = (x - mean_r x) / (std_r x (unbiased) + eps)."""
import torch
import torch.nn as nn

CATEGORY = "normalization"
DTYPE = "float32"
SHAPES = [
    {"rows": 16384, "cols": 256},
    {"rows": 3001, "cols": 777},
    {"rows": 512, "cols": 8191},
]


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=0, keepdim=True)
        std = x.std(dim=0, keepdim=True, correction=1)
        return (x - mean) / (std + self.eps)


def get_inputs(rows: int = 16384, cols: int = 256):
    # column-dependent offsets and scales
    return [torch.randn(rows, cols) * (torch.rand(cols) * 3.0 + 0.2) + torch.randn(cols) * 5.0]


def get_init_inputs():
    return [1e-5]


def flops(rows: int = 16384, cols: int = 256) -> float:
    # column sum, squared-deviation sum (3), subtract and divide (2)
    return 6.0 * rows * cols


def bytes_moved(rows: int = 16384, cols: int = 256) -> float:
    return 4.0 * (rows * cols + rows * cols)
