"""Grouped 2-D convolution (4 groups, 3x3, stride 1, padding 1) with bias, NCHW."""
import torch
import torch.nn as nn

CATEGORY = "convolution"
DTYPE = "float32"
CIN, COUT, GROUPS = 64, 128, 4
SHAPES = [
    {"batch": 16, "height": 56, "width": 56},
    {"batch": 3, "height": 45, "width": 61},
    {"batch": 64, "height": 14, "width": 14},
]


class Model(nn.Module):
    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1, groups=groups, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs(batch: int = 16, height: int = 56, width: int = 56):
    return [torch.randn(batch, CIN, height, width)]


def get_init_inputs():
    return [CIN, COUT, GROUPS]


def flops(batch: int = 16, height: int = 56, width: int = 56) -> float:
    # every output sees CIN / GROUPS input channels through a 3x3 window
    return 2.0 * batch * COUT * height * width * (CIN // GROUPS) * 9 + batch * COUT * height * width


def bytes_moved(batch: int = 16, height: int = 56, width: int = 56) -> float:
    return 4.0 * (batch * CIN * height * width + COUT * (CIN // GROUPS) * 9 + COUT + batch * COUT * height * width)
