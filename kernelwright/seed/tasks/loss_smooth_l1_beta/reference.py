import torch
import torch.nn as nn


class Model(nn.Module):
    """Smooth-L1 loss, mean over all elements.

    With d = |pred - target|: loss = 0.5 * d^2 / beta if d < beta, else d - 0.5 * beta.
    """

    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.smooth_l1_loss(pred, target, reduction="mean", beta=self.beta)


def get_inputs():
    return [torch.randn(16, 3, 777), torch.randn(16, 3, 777)]


def get_init_inputs():
    return [0.6]
