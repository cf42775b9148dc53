"""Multi-class hinge loss: mean_r sum_{c != y_r} max(0, margin - x[r, y_r] + x[r, c]) / C."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"
DTYPE = "float32"
SHAPES = [
    {"rows": 8192, "cols": 1000},
    {"rows": 1001, "cols": 37},
    {"rows": 64, "cols": 32001},
]


class Model(nn.Module):
    def __init__(self, margin: float):
        super().__init__()
        self.margin = margin

    def forward(self, scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.multi_margin_loss(scores, targets, p=1, margin=self.margin, reduction="mean")


def get_inputs(rows: int = 8192, cols: int = 1000):
    scores = torch.randn(rows, cols)
    targets = torch.randint(0, cols, (rows,), dtype=torch.int64)
    # lift the true class in some rows so the per-row terms vary
    scores[torch.arange(rows), targets] += torch.rand(rows) * 3.0
    return [scores, targets]


def get_init_inputs():
    return [1.0]


def flops(rows: int = 8192, cols: int = 1000) -> float:
    # subtract, add margin, max, accumulate per element; divide per row; mean
    return 4.0 * rows * cols + 2.0 * rows


def bytes_moved(rows: int = 8192, cols: int = 1000) -> float:
    return 4.0 * (rows * cols + 1) + 8.0 * rows
