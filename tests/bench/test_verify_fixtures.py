"""The fixture benchmark's repeated runs (bench/verify_fixtures.py), with the GPU judge stood in for: a
candidate that misses its expected reason in any run is named with its reason in every run, and fails
the command."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import Verdict

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
vf = importlib.import_module("verify_fixtures")


def test_every_run_is_kept_and_a_flip_in_one_run_is_unstable(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    expected = {Path(c.candidate).name: r for _, r, c in vf.cases(0, str(tmp_path), True)}
    calls = {"n": 0}

    def judge(cfgs: Sequence[VerifyConfig], jobs: int, on_done=None) -> list[Verdict]:  # type: ignore[no-untyped-def]
        calls["n"] += 1
        out = []
        for cfg in cfgs:
            name = Path(cfg.candidate).name
            reason = expected[name]
            if calls["n"] == 2 and name == "honest_affine.py":  # the second run rejects an honest kernel
                reason = "wrong_output"
            verdict = Verdict.of(reason)
            out.append(verdict)
            if on_done is not None:
                on_done(cfg, verdict)
        return out

    monkeypatch.setattr(vf, "verify_many", judge)
    out = tmp_path / "fixtures.json"
    monkeypatch.setattr(sys, "argv", ["verify_fixtures.py", "--seeds", "0", "--runs", "3", "--json", str(out)])
    assert vf.main() == 1 and calls["n"] == 3
    got = json.loads(out.read_text())
    assert [r["passed"] for r in got["runs"]] == [len(expected), len(expected) - 1, len(expected)]
    assert got["unstable"] == {"honest_affine.py": ["ok", "wrong_output", "ok"]}
    monkeypatch.setattr(sys, "argv", ["verify_fixtures.py", "--seeds", "0", "--runs", "1", "--json", str(out)])
    calls["n"] = 5
    assert vf.main() == 0 and json.loads(out.read_text())["unstable"] == {}
