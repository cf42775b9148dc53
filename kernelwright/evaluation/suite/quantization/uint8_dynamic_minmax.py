"""Dynamic asymmetric per-tensor uint8 quantization from the tensor's own min/max (range widened to include 0)."""
import torch
import torch.nn as nn

CATEGORY = "quantization"
DTYPE = "float32"
SHAPES = [
    {"rows": 4096, "cols": 2048},
    {"rows": 777, "cols": 1537},
    {"rows": 32, "cols": 131071},
]


class Model(nn.Module):
    """lo = min(min x, 0), hi = max(max x, 0), s = (hi - lo) / 255, zp = clamp(round(-lo / s), 0, 255),
    q = clamp(round(x / s) + zp, 0, 255) as uint8 (round half to even)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lo = torch.clamp(x.min(), max=0.0)
        hi = torch.clamp(x.max(), min=0.0)
        scale = (hi - lo).clamp_min(1e-8) / 255.0
        zp = torch.clamp(torch.round(-lo / scale), 0, 255)
        q = torch.round(x / scale) + zp
        return torch.clamp(q, 0, 255).to(torch.uint8)


def get_inputs(rows: int = 4096, cols: int = 2048):
    # skewed data: the zero point lands well away from the middle of the range
    return [torch.randn(rows, cols) * 1.3 + 0.8]


def get_init_inputs():
    return []


def flops(rows: int = 4096, cols: int = 2048) -> float:
    # min and max pass (2), then divide, round, add, clamp (2)
    return 7.0 * rows * cols


def bytes_moved(rows: int = 4096, cols: int = 2048) -> float:
    return 4.0 * rows * cols + 1.0 * rows * cols
