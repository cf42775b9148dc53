"""Gumbel-softmax with supplied noise: y = softmax((logits - log(e)) / tau) over the last dim, e ~ Exp(1) given."""
import torch
import torch.nn as nn

CATEGORY = "softmax"
DTYPE = "float32"
SHAPES = [
    {"rows": 4096, "cols": 1000},
    {"rows": 333, "cols": 4099},
    {"rows": 32, "cols": 50257},
]


class Model(nn.Module):
    def __init__(self, tau: float):
        super().__init__()
        self.tau = tau

    def forward(self, logits: torch.Tensor, exp_noise: torch.Tensor) -> torch.Tensor:
        # -log(e) with e ~ Exp(1) is a standard Gumbel sample
        return torch.softmax((logits - torch.log(exp_noise)) / self.tau, dim=-1)


def get_inputs(rows: int = 4096, cols: int = 1000):
    logits = torch.randn(rows, cols) * 2.0
    exp_noise = torch.empty(rows, cols).exponential_().clamp_min(1e-12)
    return [logits, exp_noise]


def get_init_inputs():
    return [0.7]


def flops(rows: int = 4096, cols: int = 1000) -> float:
    # log, subtract, divide, max, subtract, exp, sum, divide
    return 8.0 * rows * cols


def bytes_moved(rows: int = 4096, cols: int = 1000) -> float:
    n = rows * cols
    return 4.0 * (n + n + n)
