import torch
import torch.nn as nn


class Model(nn.Module):
    """out[..., c] = (1 - eps) * [labels == c] + eps / C."""

    def __init__(self, num_classes: int, eps: float):
        super().__init__()
        self.num_classes = num_classes
        self.eps = eps

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        one_hot = torch.nn.functional.one_hot(labels, self.num_classes).to(torch.float32)
        return one_hot * (1.0 - self.eps) + self.eps / self.num_classes


def get_inputs():
    return [torch.randint(0, 131, (64, 45), dtype=torch.int64)]


def get_init_inputs():
    return [131, 0.1]
