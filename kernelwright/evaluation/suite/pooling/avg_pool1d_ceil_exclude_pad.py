"""1-D average pooling (kernel 5, stride 3, padding 2) with ceil_mode and padding excluded from the divisor."""
import torch
import torch.nn as nn

CATEGORY = "pooling"
DTYPE = "float32"
KERNEL, STRIDE, PAD = 5, 3, 2
SHAPES = [
    {"batch": 32, "channels": 128, "length": 1024},
    {"batch": 7, "channels": 33, "length": 1001},
    {"batch": 2, "channels": 16, "length": 65537},
]


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size, stride=stride, padding=padding, ceil_mode=True, count_include_pad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs(batch: int = 32, channels: int = 128, length: int = 1024):
    return [torch.randn(batch, channels, length) + 0.5]


def get_init_inputs():
    return [KERNEL, STRIDE, PAD]


def _out(length: int) -> int:
    # PyTorch's ceil-mode rule: the last window must start inside the input or the left padding
    out = (length + 2 * PAD - KERNEL + STRIDE - 1) // STRIDE + 1
    if (out - 1) * STRIDE >= length + PAD:
        out -= 1
    return out


def flops(batch: int = 32, channels: int = 128, length: int = 1024) -> float:
    # up to KERNEL adds and one divide per output
    return (KERNEL + 1.0) * batch * channels * _out(length)


def bytes_moved(batch: int = 32, channels: int = 128, length: int = 1024) -> float:
    return 4.0 * (batch * channels * length + batch * channels * _out(length))
