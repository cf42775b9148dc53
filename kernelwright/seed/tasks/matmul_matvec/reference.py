import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix-vector product y = A @ x, A of shape (M, K), x of shape (K,)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.mv(A, x)


M, K = 777, 450


def get_inputs():
    return [torch.randn(M, K), torch.randn(K)]


def get_init_inputs():
    return []
