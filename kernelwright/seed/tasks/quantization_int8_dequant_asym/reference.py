import torch
import torch.nn as nn


class Model(nn.Module):
    """x = (q.float() - zero_point) * scale for an int8 tensor q."""

    def __init__(self, scale: float, zero_point: int):
        super().__init__()
        self.scale = scale
        self.zero_point = zero_point

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return (q.to(torch.float32) - self.zero_point) * self.scale


def get_inputs():
    return [torch.randint(-128, 128, (37, 3001), dtype=torch.int8)]


def get_init_inputs():
    return [0.0137, -9]
