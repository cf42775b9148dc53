"""bench/rl_vs_start.py: RL's start is the best finished evaluation of the compositions; the comparison names
what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.rl_vs_start import best_version, compare, main


def _evaluation(workdir: Path, folder: str, done: bool = True, **metrics: float) -> None:
    d = workdir / folder
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({"metrics": metrics}))
    if done:
        (d / ".done").touch()


def test_the_best_version_is_fast_0_first_then_compile_rate_of_finished_evaluations(tmp_path: Path) -> None:
    assert best_version(tmp_path) is None
    _evaluation(tmp_path, "evaluate-seed0-plain-synth", fast_0=0.1, compile_rate=0.5)
    _evaluation(tmp_path, "evaluate-seed1-plain-synth", fast_0=0.1, compile_rate=0.7)
    _evaluation(tmp_path, "evaluate-seed0-cuset-synth", done=False, fast_0=0.9, compile_rate=0.9)  # unfinished
    _evaluation(tmp_path, "evaluate-seed0-region-infill", fast_0=0.9, compile_rate=0.9)  # not the compositions
    assert best_version(tmp_path) == "1-plain"
    _evaluation(tmp_path, "evaluate-seed2-region-synth", fast_0=0.2, compile_rate=0.1)
    assert best_version(tmp_path) == "2-region"


def test_the_comparison_sets_each_suites_figures_side_by_side(tmp_path: Path) -> None:
    for folder, fast_0 in (("evaluate-seed0-plain-synth", 0.2), ("rl-evaluate-synth", 0.3),
                           ("evaluate-seed0-plain-infill", 0.5), ("rl-evaluate-infill", 0.4)):
        _evaluation(tmp_path, folder, fast_0=fast_0, compile_rate=0.8, unlisted=1.0)
    rows = compare(tmp_path, "0-plain", "models:/m/3", ["synth", "infill"])
    assert rows["synth"] == {"start": {"fast_0": 0.2, "compile_rate": 0.8}, "rl": {"fast_0": 0.3, "compile_rate": 0.8}}
    written = json.loads((tmp_path / "rl_vs_start.json").read_text())
    assert written["start_version"] == "0-plain" and written["rl_model"] == "models:/m/3"
    assert written["infill"]["rl"]["fast_0"] == 0.4


def test_a_missing_evaluation_is_named_not_a_traceback(tmp_path: Path) -> None:
    _evaluation(tmp_path, "evaluate-seed0-plain-synth", fast_0=0.2)
    with pytest.raises(SystemExit, match="rl-evaluate-synth.*no finished evaluation of the rl version on synth"):
        main(["compare", str(tmp_path), "0-plain", "m", "synth"])
    with pytest.raises(SystemExit, match="no finished evaluation of the held-out compositions"):
        main(["best", str(tmp_path / "empty")])
    assert not (tmp_path / "rl_vs_start.json").exists()
