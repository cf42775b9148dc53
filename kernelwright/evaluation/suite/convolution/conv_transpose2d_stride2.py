"""Transposed 2-D convolution that upsamples by 2: kernel 4, stride 2, padding 1, with bias (NCHW)."""
import torch
import torch.nn as nn

CATEGORY = "convolution"
DTYPE = "float32"
CIN, COUT, K = 64, 32, 4
SHAPES = [
    {"batch": 16, "height": 64, "width": 64},
    {"batch": 3, "height": 37, "width": 53},
    {"batch": 64, "height": 16, "width": 16},
]


class Model(nn.Module):
    def __init__(self, cin: int, cout: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(cin, cout, kernel_size, stride=stride, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


def get_inputs(batch: int = 16, height: int = 64, width: int = 64):
    return [torch.randn(batch, CIN, height, width)]


def get_init_inputs():
    return [CIN, COUT, K, 2, 1]


def _out(size: int) -> int:
    return (size - 1) * 2 - 2 * 1 + K


def flops(batch: int = 16, height: int = 64, width: int = 64) -> float:
    # each input pixel scatters a K x K x COUT patch: K*K*COUT*CIN multiply-adds, plus the bias per output
    return 2.0 * batch * height * width * CIN * COUT * K * K + batch * COUT * _out(height) * _out(width)


def bytes_moved(batch: int = 16, height: int = 64, width: int = 64) -> float:
    return 4.0 * (batch * CIN * height * width + CIN * COUT * K * K + COUT
                  + batch * COUT * _out(height) * _out(width))
