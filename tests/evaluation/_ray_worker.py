"""Stand-ins for `verify.run_worker`, importable by Ray's worker processes (they start in the checkout; this module
imports little, so that they start fast)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from kernelwright.verifier.spec import Spec
from kernelwright.verifier.verdict import Verdict


@dataclass(frozen=True)
class FakeWorker:
    """A verdict that depends only on the problem and candidate sources (as a real judge's would, timing noise
    aside); every call leaves a mark in `marks`: the process it ran in and the timing lock it was given."""

    marks: str

    def __call__(self, spec: Spec, timeout_s: float, host_memory_gb: float = 0.0, *_: object) -> Verdict:
        problem, candidate = Path(spec.problem).read_text(), Path(spec.candidate).read_text()
        digest = hashlib.sha256((problem + candidate).encode()).digest()
        Path(self.marks).mkdir(parents=True, exist_ok=True)
        (Path(self.marks) / f"{uuid.uuid4().hex}.json").write_text(json.dumps(
            {"pid": os.getpid(), "timing_lock": spec.timing_lock, "candidate": spec.candidate}))
        if digest[0] % 3 == 0:
            return Verdict.of("wrong_output", f"max abs error {digest[1] / 16:.3f}", compile_s=1.0)
        speedup = 0.5 + digest[2] / 128
        return Verdict.of("ok", compile_s=1.0, runtime_ms=1.0, ref_runtime_ms=speedup, speedup=speedup,
                          custom_kernel_time_share=1.0, seeds=[0, 1], timing_seed=10_000 + digest[3])


def fails(*_: object) -> Verdict:
    raise RuntimeError("the node lost its GPU")


def marks(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
