"""The padding benchmark (bench/train_padding.py): the same samples in every order, and batches of
similar lengths carrying far less padding than random ones."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
padding = importlib.import_module("train_padding")


def test_grouped_batches_carry_less_padding() -> None:
    lengths = [100 + (i * 7919) % 3000 for i in range(640)]  # spread from 100 to 3,099 tokens
    orders = padding.orders(lengths, 32, 0)
    assert all(sorted(o) == list(range(640)) for o in orders.values())  # every sample once per epoch
    got = {name: padding.padding(lengths, order, 32) for name, order in orders.items()}
    assert got["random"]["real_tokens"] == got["group_by_length"]["real_tokens"] == sum(lengths)
    assert got["group_by_length"]["padding_share"] < got["random"]["padding_share"] / 3


def test_a_batch_pads_to_its_longest_sample() -> None:
    got = padding.padding([1, 3, 2, 2], [0, 1, 2, 3], 2)
    assert (got["real_tokens"], got["computed_tokens"]) == (8, 10)  # 2 x 3 + 2 x 2
