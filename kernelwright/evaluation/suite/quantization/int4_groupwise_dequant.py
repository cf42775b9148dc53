"""Dequantize packed 4-bit weights with per-group (128 columns) scales and zero points: w = (q - z) * s."""
import torch
import torch.nn as nn

CATEGORY = "quantization"
DTYPE = "uint8"
GROUP = 128
SHAPES = [
    {"rows": 4096, "cols": 4096},
    {"rows": 3001, "cols": 1280},
    {"rows": 1024, "cols": 11008},
]


class Model(nn.Module):
    """packed[r, j] holds column 2j in its low nibble and column 2j + 1 in its high nibble (values 0..15).
    scales and zeros are (rows, cols / group) float32; output (rows, cols) float32."""

    def __init__(self, group_size: int):
        super().__init__()
        self.group_size = group_size

    def forward(self, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
        rows = packed.shape[0]
        low = packed & 0x0F
        high = packed >> 4
        q = torch.stack((low, high), dim=-1).reshape(rows, -1).to(torch.float32)
        groups = q.shape[1] // self.group_size
        w = (q.view(rows, groups, self.group_size) - zeros.unsqueeze(-1)) * scales.unsqueeze(-1)
        return w.reshape(rows, -1)


def get_inputs(rows: int = 4096, cols: int = 4096):
    packed = torch.randint(0, 256, (rows, cols // 2), dtype=torch.uint8)
    scales = torch.rand(rows, cols // GROUP) * 0.02 + 0.002
    zeros = torch.randint(5, 11, (rows, cols // GROUP)).to(torch.float32)
    return [packed, scales, zeros]


def get_init_inputs():
    return [GROUP]


def flops(rows: int = 4096, cols: int = 4096) -> float:
    # subtract and multiply per weight (nibble extraction is integer work)
    return 2.0 * rows * cols


def bytes_moved(rows: int = 4096, cols: int = 4096) -> float:
    return 1.0 * rows * cols / 2 + 4.0 * 2 * rows * (cols // GROUP) + 4.0 * rows * cols
