"""The verification throughput benchmark's repeat logic (bench/verify_throughput.py), with the
phases themselves (GPU only) stood in for by fixed wall times."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))  # the benchmark's modules import each other by name, as when it is run
vt = importlib.import_module("verify_throughput")


def test_kernelwright_phases_repeat_and_keep_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    walls = iter([80.0, 40.0, 60.0])
    monkeypatch.setattr(vt, "_phase", lambda name, tasks, args: {"wall_s": next(walls), "candidates": 32, "tag": name})
    got = vt._repeated("kernelwright", [], argparse.Namespace(repeat=3))
    assert got["runs_per_hour"] == pytest.approx([1440.0, 2880.0, 1920.0])
    assert got["per_hour_median"] == pytest.approx(1920.0) and got["per_hour_range"] == pytest.approx([1440.0, 2880.0])
    assert got["wall_s"] == 60.0 and got["per_hour"] == pytest.approx(1920.0)  # the median run's own figures


def test_kernelbench_runs_once_whatever_the_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def phase(name: str, tasks: list, args: argparse.Namespace) -> dict:
        calls.append(name)
        return {"wall_s": 400.0, "candidates": 32}

    monkeypatch.setattr(vt, "_phase", phase)
    got = vt._repeated("kernelbench_best_mode", [], argparse.Namespace(repeat=3))
    assert calls == ["kernelbench_best_mode"] and got["runs_per_hour"] == pytest.approx([288.0])
