import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-label BCE-with-logits with a per-class pos_weight, mean over all elements.

    Per element (x logit, y target, p = pos_weight[class]):
        loss = (1 - y) * x + (1 + (p - 1) * y) * softplus(-x)
    """

    def __init__(self, num_classes: int):
        super().__init__()
        self.register_buffer("pos_weight", torch.linspace(0.5, 3.0, num_classes))

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.binary_cross_entropy_with_logits(
            logits, targets, pos_weight=self.pos_weight, reduction="mean"
        )


def get_inputs():
    logits = torch.randn(64, 1531) * 3.0
    targets = torch.randint(0, 2, (64, 1531)).to(torch.float32)
    return [logits, targets]


def get_init_inputs():
    return [1531]
