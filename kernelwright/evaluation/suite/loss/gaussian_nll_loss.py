"""Gaussian negative log-likelihood with predicted variances: mean(0.5 * (log var + (mu - y)^2 / var)), var >= eps."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"
DTYPE = "float32"
SHAPES = [
    {"rows": 4096, "cols": 512},
    {"rows": 999, "cols": 333},
    {"rows": 65536, "cols": 17},
]


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, mean: torch.Tensor, target: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        return F.gaussian_nll_loss(mean, target, var, full=False, eps=self.eps, reduction="mean")


def get_inputs(rows: int = 4096, cols: int = 512):
    mean = torch.randn(rows, cols)
    target = mean + torch.randn(rows, cols) * 0.8
    var = torch.rand(rows, cols) * 2.0 + 0.05
    return [mean, target, var]


def get_init_inputs():
    return [1e-6]


def flops(rows: int = 4096, cols: int = 512) -> float:
    # clamp, log, subtract, square, divide, add, halve, accumulate
    return 8.0 * rows * cols


def bytes_moved(rows: int = 4096, cols: int = 512) -> float:
    return 4.0 * (3 * rows * cols + 1)
