"""Product over a short middle dimension: y[b, d] = prod_n x[b, n, d]."""
import torch
import torch.nn as nn

CATEGORY = "reduction"
DTYPE = "float32"
SHAPES = [
    {"batch": 64, "n": 16, "d": 4096},
    {"batch": 33, "n": 13, "d": 1001},
    {"batch": 4096, "n": 8, "d": 130},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.prod(x, dim=1)


def get_inputs(batch: int = 64, n: int = 16, d: int = 4096):
    # factors around +-1 with both signs, so the products keep a sane range and vary in sign
    sign = torch.where(torch.rand(batch, n, d) < 0.3, -1.0, 1.0)
    return [sign * (1.0 + 0.4 * torch.randn(batch, n, d)).abs().clamp_min(0.05)]


def get_init_inputs():
    return []


def flops(batch: int = 64, n: int = 16, d: int = 4096) -> float:
    return 1.0 * batch * n * d


def bytes_moved(batch: int = 64, n: int = 16, d: int = 4096) -> float:
    return 4.0 * (batch * n * d + batch * d)
