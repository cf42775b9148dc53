"""CUDA kernels of the ordering zoo (tests/fixtures/verify/orderings): honest float32 orders are
correct, lower precision is a precision downgrade, tanh-GELU an approximation, each with its
KernelBench view. The verdicts need a GPU; the fixtures' static checks run anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import REASON_STATUS
from kernelwright.verifier.verify import source_warnings, static_verdict, verify_many

ORDERINGS = Path(__file__).parent.parent / "fixtures" / "verify" / "orderings"
EXPECTED: dict[str, dict] = json.loads((ORDERINGS / "expected.json").read_text())


def _problem(name: str) -> Path:
    own = ORDERINGS / "problems" / name
    return own if own.exists() else ORDERINGS.parent / "problems" / name


def test_every_fixture_is_expected_and_passes_the_static_checks() -> None:
    assert sorted(p.name for p in (ORDERINGS / "candidates").glob("*.py")) == sorted(EXPECTED)
    for name, entry in EXPECTED.items():
        source = (ORDERINGS / "candidates" / name).read_text()
        assert static_verdict(source) is None and source_warnings(source) == [], name
        assert entry["reason"] in REASON_STATUS and _problem(entry["problem"]).exists()


@pytest.mark.gpu
def test_the_orders_give_their_verdicts_on_gpu(tmp_path: Path) -> None:
    """Run with `pytest -m gpu tests/verifier/test_ordering_fixtures.py` on a CUDA host."""
    names = sorted(EXPECTED)
    cfgs = [VerifyConfig(problem=str(_problem(EXPECTED[n]["problem"])), candidate=str(ORDERINGS / "candidates" / n),
                         timeout_s=240.0, compile_baseline=False, build_cache=str(tmp_path / "builds"))
            for n in names]
    verdicts = verify_many(cfgs, jobs=4)
    (tmp_path / "verdicts.json").write_text(json.dumps({n: v.to_json() for n, v in zip(names, verdicts, strict=True)},
                                                       indent=1))
    got = {n: (v.reason, v.kb_correct, v.detail[:300]) for n, v in zip(names, verdicts, strict=True)}
    wrong = {n: got[n] for n in names if got[n][0] != EXPECTED[n]["reason"]
             or ("kb_correct" in EXPECTED[n] and got[n][1] != EXPECTED[n]["kb_correct"])}
    assert not wrong, wrong
    for n, v in zip(names, verdicts, strict=True):
        if v.kb_correct:  # timed for the KernelBench view, whatever the strict reason
            assert v.kb_speedup is not None and v.kb_speedup > 0, n
        assert (v.speedup is not None) == (v.correct and v.speedup is not None)
