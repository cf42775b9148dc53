"""Dynamic symmetric per-row int8 quantization: s[r] = max|x[r]| / 127; q = clamp(round(x / s[r]), -127, 127)."""
import torch
import torch.nn as nn

CATEGORY = "quantization"
DTYPE = "float32"
SHAPES = [
    {"rows": 4096, "cols": 2048},
    {"rows": 333, "cols": 4099},
    {"rows": 65536, "cols": 96},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-8) / 127.0
        q = torch.round(x / scale)  # round half to even
        return torch.clamp(q, -127, 127).to(torch.int8)


def get_inputs(rows: int = 4096, cols: int = 2048):
    # per-row magnitudes differ by orders of magnitude, as activations of different tokens do
    row_scale = torch.exp(torch.randn(rows, 1) * 1.5)
    return [torch.randn(rows, cols) * row_scale]


def get_init_inputs():
    return []


def flops(rows: int = 4096, cols: int = 2048) -> float:
    # abs-max (2), divide, round, clamp (2)
    return 5.0 * rows * cols


def bytes_moved(rows: int = 4096, cols: int = 2048) -> float:
    return 4.0 * rows * cols + 1.0 * rows * cols
