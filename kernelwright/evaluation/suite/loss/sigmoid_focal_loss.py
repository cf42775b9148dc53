"""Sigmoid focal loss (gamma 2, alpha 0.25) over multi-label logits, mean over all elements."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"
DTYPE = "float32"
SHAPES = [
    {"rows": 16384, "cols": 256},
    {"rows": 1001, "cols": 91},
    {"rows": 4096, "cols": 1203},
]


class Model(nn.Module):
    def __init__(self, alpha: float, gamma: float):
        super().__init__()
        self.alpha = alpha
        self.gamma = gamma

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p = torch.sigmoid(logits)
        ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
        p_t = p * targets + (1.0 - p) * (1.0 - targets)
        alpha_t = self.alpha * targets + (1.0 - self.alpha) * (1.0 - targets)
        return (alpha_t * ce * (1.0 - p_t) ** self.gamma).mean()


def get_inputs(rows: int = 16384, cols: int = 256):
    logits = torch.randn(rows, cols) * 2.5 - 1.0
    targets = (torch.rand(rows, cols) < 0.1).to(torch.float32)  # sparse positives, as in detection
    return [logits, targets]


def get_init_inputs():
    return [0.25, 2.0]


def flops(rows: int = 16384, cols: int = 256) -> float:
    # sigmoid (3), BCE with logits (~6), p_t (4), alpha_t (3), (1 - p_t)^2 (2), products (2), mean (1)
    return 21.0 * rows * cols


def bytes_moved(rows: int = 16384, cols: int = 256) -> float:
    return 4.0 * (2 * rows * cols + 1)
