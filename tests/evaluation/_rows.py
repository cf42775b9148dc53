"""A minimal evaluated row for the figures' tests (the fields `metrics.HasVerdict` reads)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelwright.verifier.verdict import Verdict


@dataclass(frozen=True)
class FakeRow:
    category: str
    verdict: Verdict
    compiled: bool = True
    gpu_verified: bool = True
