"""Complex product of two tensors stored as interleaved (real, imag) pairs in the last dim of size 2."""
import torch
import torch.nn as nn

CATEGORY = "math"
DTYPE = "float32"
SHAPES = [
    {"rows": 2048, "cols": 1024},
    {"rows": 999, "cols": 1537},
    {"rows": 64, "cols": 30001},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ar, ai = a[..., 0], a[..., 1]
        br, bi = b[..., 0], b[..., 1]
        return torch.stack((ar * br - ai * bi, ar * bi + ai * br), dim=-1)


def get_inputs(rows: int = 2048, cols: int = 1024):
    return [torch.randn(rows, cols, 2), torch.randn(rows, cols, 2)]


def get_init_inputs():
    return []


def flops(rows: int = 2048, cols: int = 1024) -> float:
    # 4 multiplies and 2 adds per complex element
    return 6.0 * rows * cols


def bytes_moved(rows: int = 2048, cols: int = 1024) -> float:
    n = rows * cols * 2
    return 4.0 * (n + n + n)
