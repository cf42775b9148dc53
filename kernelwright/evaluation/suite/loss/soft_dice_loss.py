"""Soft Dice loss for segmentation: softmax over classes vs one-hot labels, 1 - mean_{b,c} dice(b, c)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"
DTYPE = "float32"
SHAPES = [
    {"batch": 8, "classes": 8, "height": 256, "width": 256},
    {"batch": 3, "classes": 5, "height": 97, "width": 131},
    {"batch": 32, "classes": 21, "height": 64, "width": 64},
]


class Model(nn.Module):
    def __init__(self, smooth: float):
        super().__init__()
        self.smooth = smooth

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(logits, dim=1)
        onehot = F.one_hot(labels, logits.shape[1]).permute(0, 3, 1, 2).to(probs.dtype)
        inter = (probs * onehot).sum(dim=(2, 3))
        denom = probs.sum(dim=(2, 3)) + onehot.sum(dim=(2, 3))
        dice = (2.0 * inter + self.smooth) / (denom + self.smooth)
        return 1.0 - dice.mean()


def get_inputs(batch: int = 8, classes: int = 8, height: int = 256, width: int = 256):
    labels = torch.randint(0, classes, (batch, height, width), dtype=torch.int64)
    # logits lean towards the true class, so the dice score is far from its chance level
    logits = torch.randn(batch, classes, height, width) * 2.0
    logits += 2.0 * F.one_hot(labels, classes).permute(0, 3, 1, 2).to(torch.float32)
    return [logits, labels]


def get_init_inputs():
    return [1.0]


def flops(batch: int = 8, classes: int = 8, height: int = 256, width: int = 256) -> float:
    # softmax over classes (max, subtract, exp, sum, divide), then intersection and probability sums
    return 7.0 * batch * classes * height * width


def bytes_moved(batch: int = 8, classes: int = 8, height: int = 256, width: int = 256) -> float:
    return 4.0 * (batch * classes * height * width + 1) + 8.0 * batch * height * width
