import torch
import torch.nn as nn


class Model(nn.Module):
    """out[b, l, :] = weight[ids[b, l], :] * scale, weight owned by an nn.Embedding."""

    def __init__(self, num_embeddings: int, embedding_dim: int, scale: float):
        super().__init__()
        self.scale = scale
        self.emb = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.emb(ids) * self.scale


def get_inputs():
    return [torch.randint(0, 5003, (16, 77), dtype=torch.int64)]


def get_init_inputs():
    return [5003, 100, 10.0]
