import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix product: out[b] = A[b] @ B[b], A (Bt, M, K), B (Bt, K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


BATCH, M, K, N = 6, 127, 96, 203


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
