import torch
import torch.nn as nn


class Model(nn.Module):
    """out[m, n] = float(sum_k a[m, k] * b[n, k]) * scale_a[m] * scale_b[n].

    a: (M, K) int8 activations, b: (N, K) int8 weights (row-major, nn.Linear layout),
    scale_a: (M,) per-row activation scales, scale_b: (N,) per-output-channel weight scales.
    The integer dot products are exact (computed here with integer broadcasting).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
        acc = (a.to(torch.int32).unsqueeze(1) * b.to(torch.int32).unsqueeze(0)).sum(dim=-1)
        return acc.to(torch.float32) * scale_a.view(-1, 1) * scale_b.view(1, -1)


def get_inputs():
    m, n, k = 77, 129, 300
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8)
    b = torch.randint(-128, 128, (n, k), dtype=torch.int8)
    scale_a = torch.rand(m) * 0.02 + 0.005
    scale_b = torch.rand(n) * 0.01 + 0.001
    return [a, b, scale_a, scale_b]


def get_init_inputs():
    return []
