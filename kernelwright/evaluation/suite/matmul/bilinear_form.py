"""Bilinear layer: y[..., o] = x1[...] W[o] x2[...]^T + b[o] (nn.Bilinear) over the last dims of (batch, seq, *)."""
import torch
import torch.nn as nn

CATEGORY = "matmul"
DTYPE = "float32"
IN1, IN2, OUT = 128, 96, 64
SHAPES = [
    {"batch": 64, "seq": 256},
    {"batch": 7, "seq": 333},
    {"batch": 1024, "seq": 3},
]


class Model(nn.Module):
    def __init__(self, in1: int, in2: int, out: int):
        super().__init__()
        self.bilinear = nn.Bilinear(in1, in2, out, bias=True)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return self.bilinear(x1, x2)


def get_inputs(batch: int = 64, seq: int = 256):
    return [torch.randn(batch, seq, IN1) * 0.5, torch.randn(batch, seq, IN2) * 0.5]


def get_init_inputs():
    return [IN1, IN2, OUT]


def flops(batch: int = 64, seq: int = 256) -> float:
    # per sample: t = x1 @ W.view(in1, out * in2)  (2 * in1 * out * in2), then out dot products of length in2
    rows = batch * seq
    return rows * (2.0 * IN1 * OUT * IN2 + 2.0 * OUT * IN2 + OUT)


def bytes_moved(batch: int = 64, seq: int = 256) -> float:
    rows = batch * seq
    return 4.0 * (rows * (IN1 + IN2 + OUT) + OUT * IN1 * IN2 + OUT)
