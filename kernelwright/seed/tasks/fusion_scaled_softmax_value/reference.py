import torch
import torch.nn as nn


class Model(nn.Module):
    """For each (batch, head): p = softmax(scores * scale) over L, out = p @ values -> (B, H, D)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        p = torch.softmax(scores * self.scale, dim=-1)
        return torch.matmul(p.unsqueeze(-2), values).squeeze(-2)


def get_inputs():
    b, h, l, d = 4, 6, 397, 72
    return [torch.randn(b, h, l) * 4.0, torch.randn(b, h, l, d)]


def get_init_inputs():
    return [0.8]
