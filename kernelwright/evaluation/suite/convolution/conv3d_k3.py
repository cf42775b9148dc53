"""3-D convolution, 3x3x3 kernel, stride 1, padding 1, with bias (NCDHW)."""
import torch
import torch.nn as nn

CATEGORY = "convolution"
DTYPE = "float32"
CIN, COUT = 8, 16
SHAPES = [
    {"batch": 4, "depth": 32, "height": 64, "width": 64},
    {"batch": 2, "depth": 13, "height": 45, "width": 37},
    {"batch": 16, "depth": 8, "height": 16, "width": 16},
]


class Model(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, kernel_size=3, padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs(batch: int = 4, depth: int = 32, height: int = 64, width: int = 64):
    return [torch.randn(batch, CIN, depth, height, width)]


def get_init_inputs():
    return [CIN, COUT]


def flops(batch: int = 4, depth: int = 32, height: int = 64, width: int = 64) -> float:
    vox = batch * depth * height * width
    return 2.0 * vox * COUT * CIN * 27 + vox * COUT


def bytes_moved(batch: int = 4, depth: int = 32, height: int = 64, width: int = 64) -> float:
    vox = batch * depth * height * width
    return 4.0 * (vox * CIN + COUT * CIN * 27 + COUT + vox * COUT)
