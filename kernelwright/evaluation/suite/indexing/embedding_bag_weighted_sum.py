"""EmbeddingBag, mode 'sum' with per-sample weights: out[b] = sum_{i in bag b} w[i] * table[idx[i]], ragged bags."""
import torch
import torch.nn as nn

CATEGORY = "indexing"
DTYPE = "int64"
NUM_EMB, DIM = 50000, 128
SHAPES = [
    {"bags": 8192, "bag_size": 48},
    {"bags": 1001, "bag_size": 7},
    {"bags": 64, "bag_size": 1000},
]


class Model(nn.Module):
    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="sum")

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets, per_sample_weights=weights)


def get_inputs(bags: int = 8192, bag_size: int = 48):
    total = bags * bag_size
    indices = torch.randint(0, NUM_EMB, (total,), dtype=torch.int64)
    # ragged bags: bags - 1 distinct cut points in [1, total); every bag is non-empty
    cuts = torch.randperm(total - 1)[: bags - 1] + 1
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.sort(cuts).values])
    weights = torch.rand(total) * 2.0 - 0.5
    return [indices, offsets, weights]


def get_init_inputs():
    return [NUM_EMB, DIM]


def flops(bags: int = 8192, bag_size: int = 48) -> float:
    return 2.0 * bags * bag_size * DIM


def bytes_moved(bags: int = 8192, bag_size: int = 48) -> float:
    total = bags * bag_size
    # each distinct table row once (expected count for uniform ids), indices (8 B) and weights (4 B),
    # offsets, and the output
    distinct = NUM_EMB * (1.0 - (1.0 - 1.0 / NUM_EMB) ** total)
    return 4.0 * (distinct * DIM + total + bags * DIM) + 8.0 * (total + bags)
