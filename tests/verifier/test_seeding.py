"""The judge's and runner's seeding (seeding.seed_all): the draws torch.manual_seed gives, without
its calls for devices no judge uses (each records a stack trace where that device never started)."""

from __future__ import annotations

import pytest
import torch

from kernelwright.verifier.seeding import seed_all


def test_seed_all_draws_what_torch_manual_seed_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(1234)
    expected = (torch.randn(64), torch.randint(0, 10, (16,)), torch.nn.Linear(8, 4).weight.detach().clone())
    monkeypatch.setattr(torch.xpu, "manual_seed_all", lambda seed: pytest.fail("an unused device seeded"))
    seed_all(1234)
    got = (torch.randn(64), torch.randint(0, 10, (16,)), torch.nn.Linear(8, 4).weight.detach().clone())
    assert all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))


def test_seed_all_seeds_the_gpu_generator_as_torch_does(monkeypatch: pytest.MonkeyPatch) -> None:
    seeded: list[int] = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded.append)
    seed_all(77)
    assert seeded == [77]
