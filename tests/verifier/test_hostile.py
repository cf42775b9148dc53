"""Hostile candidates change nothing outside their runner's scratch folder and no other verdict.

A hostile fixture (`"hostile": true` in expected.json) forges verdicts, poisons the reference-timing
cache, plants modules for later runs or kills and attaches to the other candidates' processes (honest
ones run in the same batch and must stay correct). Run after honest candidates have filled the caches; the
installed package, the caches, the working folder and every import folder are fingerprinted before
and after, and an honest candidate verified after them gets the verdict and figures it got before.
Wants a GPU no other work is using: a disturbed reference timing is not cached, so the control's
reference figure is only comparable before and after on a quiet GPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

import kernelwright
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verify import verify_many

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"
EXPECTED: dict[str, dict] = json.loads((FIXTURES / "expected.json").read_text())
HOSTILE = sorted(n for n, e in EXPECTED.items() if e.get("hostile"))
CONTROL = "honest_affine.py"
BESIDE = ["honest_affine.py", "honest_affine.py"]  # honest candidates verified in the hostile ones' batch


def _cfg(name: str, cache: Path) -> VerifyConfig:
    return VerifyConfig(problem=str(FIXTURES / "problems" / EXPECTED[name]["problem"]),
                        candidate=str(FIXTURES / "candidates" / name), timeout_s=240.0, compile_baseline=False,
                        build_cache=str(cache))


def _tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file beneath `root` (bytecode caches left out: the judge's own imports write them)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def fingerprint(cache: Path) -> dict[str, object]:
    """The package and the caches file by file; the working folder and every import folder by name."""
    package = Path(kernelwright.__file__).resolve().parent
    folders = {Path.cwd(), *(Path(p) for p in sys.path if p and os.path.isdir(p))}
    return {"package": _tree_digest(package), "cache": _tree_digest(cache),
            "names": {str(f): sorted(os.listdir(f)) for f in folders}}


@pytest.mark.gpu
def test_hostile_candidates_change_no_file_and_no_other_verdict(tmp_path: Path) -> None:
    cache = tmp_path / "builds"
    before_control = verify_many([_cfg(CONTROL, cache)], jobs=1)[0]
    assert before_control.correct, before_control.detail
    before = fingerprint(cache)
    batch = verify_many([_cfg(n, cache) for n in [*HOSTILE, *BESIDE]], jobs=8)
    verdicts, beside = batch[:len(HOSTILE)], batch[len(HOSTILE):]
    after_control = verify_many([_cfg(CONTROL, cache)], jobs=1)[0]
    after = fingerprint(cache)
    got = {n: (v.reason, v.detail, v.isolation) for n, v in zip(HOSTILE, verdicts, strict=True)}
    print(json.dumps(got, indent=1))  # whole details (a runner's stderr tail among them), shown when the test fails
    assert {n: r for n, (r, _, _) in got.items()} == {n: EXPECTED[n]["reason"] for n in HOSTILE}
    assert all(v.correct for v in beside), [(v.reason, v.detail[:300]) for v in beside]  # none killed or disturbed
    assert after["package"] == before["package"]
    assert after["names"] == before["names"]
    assert {k: after["cache"].get(k) for k in before["cache"]} == before["cache"]  # nothing cached was touched
    # new entries: only reference timings the judge took in the batch (one disturbed earlier is not cached)
    assert all(k.startswith("ref-timings/") for k in after["cache"].keys() - before["cache"].keys())
    assert after_control.correct and after_control.ref_runtime_ms == before_control.ref_runtime_ms
    assert after_control.speedup is not None and before_control.speedup is not None
    assert 0.5 < after_control.speedup / before_control.speedup < 2.0
