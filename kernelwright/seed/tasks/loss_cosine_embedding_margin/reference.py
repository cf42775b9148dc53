import torch
import torch.nn as nn


class Model(nn.Module):
    """Cosine embedding loss per sample (no reduction).

    cos = <a, b> / sqrt((|a|^2 + 1e-12) * (|b|^2 + 1e-12))
    loss = 1 - cos if label == 1;  max(0, cos - margin) if label == -1.
    """

    def __init__(self, margin: float):
        super().__init__()
        self.margin = margin

    def forward(self, a: torch.Tensor, b: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cosine_embedding_loss(a, b, labels, margin=self.margin, reduction="none")


def get_inputs():
    n, d = 515, 300
    a = torch.randn(n, d)
    # b is correlated with a so that cosines spread over a useful range on both sides of the margin
    b = 0.35 * a + torch.randn(n, d)
    labels = torch.randint(0, 2, (n,), dtype=torch.int64) * 2 - 1
    return [a, b, labels]


def get_init_inputs():
    return [0.2]
