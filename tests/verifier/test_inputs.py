"""Where the draws are made (verifier/inputs.py): on the GPU with CUDA's generator by default, on the
host where that is off or the problem's get_inputs cannot run under a CUDA default device; a judge
and its runner given the same setting draw the same numbers."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from kernelwright.verifier import inputs
from kernelwright.verifier.inputs import DISTRIBUTIONS, draw_check_inputs, draw_on_gpu

gpu = pytest.mark.gpu


def _problem(numpy_inputs: bool = False) -> types.ModuleType:
    def get_inputs(n: int = 4096) -> list[Any]:
        x = torch.randn(n, 8)
        if numpy_inputs:  # a get_inputs that needs host tensors
            x = torch.from_numpy(x.numpy() * np.float32(2.0))
        return [x, torch.randint(0, 5, (n,)), 3]

    return types.SimpleNamespace(get_inputs=get_inputs)  # type: ignore[return-value]


@pytest.fixture(autouse=True)
def _setting_restored() -> Iterator[None]:
    yield
    draw_on_gpu(True)


def _on_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU machine stands in for the GPU: `.cuda()` keeps a tensor where it is."""
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)


def test_without_a_cuda_default_device_the_draw_is_made_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("on a GPU the draw is made there (the GPU test below)")
    _on_host(monkeypatch)
    for dist in DISTRIBUTIONS:
        draw_on_gpu(True)
        tried = draw_check_inputs(_problem(), {"n": 64}, 1, dist)  # CUDA refused: made on the host
        draw_on_gpu(False)
        host = draw_check_inputs(_problem(), {"n": 64}, 1, dist)
        assert all(torch.equal(a, b) for a, b in zip(tried[:2], host[:2], strict=True)) and tried[2] == 3
    assert inputs._ON_GPU == [False]


@gpu
def test_a_draw_is_made_on_the_gpu_and_is_the_same_in_every_process_that_draws_it() -> None:
    draw_on_gpu(True)
    first = draw_check_inputs(_problem(), {}, 1, "heavy_tailed")
    again = draw_check_inputs(_problem(), {}, 1, "heavy_tailed")
    assert all(torch.equal(a, b) for a, b in zip(first[:2], again[:2], strict=True))  # what the runner draws too
    assert first[0].is_cuda and first[1].is_cuda and first[1].dtype == torch.int64
    draw_on_gpu(False)
    host = draw_check_inputs(_problem(), {}, 1, "heavy_tailed")
    assert host[0].is_cuda and not torch.equal(host[0], first[0])  # another generator: other numbers
    other = draw_check_inputs(_problem(), {}, 2, "heavy_tailed")
    assert not torch.equal(other[0], host[0])


@gpu
def test_a_get_inputs_that_needs_host_tensors_is_drawn_on_the_host() -> None:
    draw_on_gpu(True)
    tried = draw_check_inputs(_problem(numpy_inputs=True), {}, 3, "signed")
    draw_on_gpu(False)
    host = draw_check_inputs(_problem(numpy_inputs=True), {}, 3, "signed")
    assert tried[0].is_cuda and torch.equal(tried[0], host[0])
