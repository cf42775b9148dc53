"""scripts/judge_gpu.sh with a stand-in interpreter: the steps in the order STEPS names them, each skipped
where its file is there, and an unknown step refused before any work."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.scripts.stand_in import run_with_stand_in

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "judge_gpu.sh"
# logs the bench each call runs and writes the --json file it names
STAND_IN = r"""#!/usr/bin/env bash
log() { echo "$1 $2" >> "$LOG"; }
bench=$(basename "$1"); shift
json=""
while [ $# -gt 0 ]; do
    if [ "$1" = "--json" ]; then json=$2; fi
    shift
done
log bench "$bench"
[ -n "$json" ] && echo '{}' > "$json"
exit 0
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _benches(calls: list[tuple[str, str]]) -> list[str]:
    return [arg for kind, arg in calls if kind == "bench"]


def test_the_steps_run_in_the_order_named_and_each_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    calls = run_with_stand_in(SCRIPT, STAND_IN, tmp_path, out, {"STEPS": "fixtures throughput fidelity",
                                                                "FIXTURE_RUNS": "1"}, cwd=ROOT)
    assert _benches(calls) == ["verify_fixtures.py", "verify_throughput.py", "timing_fidelity.py"]
    assert (out / "verify_fixtures_runs1.json").is_file() and (out / "verify_throughput.json").is_file()
    again = run_with_stand_in(SCRIPT, STAND_IN, tmp_path, out, {"STEPS": "throughput fixtures clock",
                                                                "FIXTURE_RUNS": "1"}, cwd=ROOT)
    assert _benches(again) == ["timer_bound_calibration.py"] * 2  # the clock's two runs; the others were done


def test_an_unknown_step_ends_the_script_before_any_work(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "LOG": str(tmp_path / "calls.log"), "STEPS": "fixtures throughpt"}
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out")], env=env, capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "unknown step 'throughpt'" in done.stderr
    assert not (tmp_path / "calls.log").exists()


# logs each bench call with its flags (one line: the bench, then every argument but the --json file)
FLAGS_STAND_IN = r"""#!/usr/bin/env bash
bench=$(basename "$1"); shift
json=""; flags=""
while [ $# -gt 0 ]; do
    if [ "$1" = "--json" ]; then json=$2; shift; else flags="$flags $1"; fi
    shift
done
echo "bench $bench$flags" >> "$LOG"
[ -n "$json" ] && echo '{}' > "$json"
exit 0
"""


def test_the_ab_steps_run_each_side_and_the_fixtures_with_the_setting_they_test(tmp_path: Path) -> None:
    """held: the default (outputs held) against kernelwright_unheld, then the fixtures with it off;
    early: the default (the clock's early stop) against kernelwright_full_clock beside KernelBench's best mode,
    then the fixtures with every round of the clock."""
    out = tmp_path / "out"
    calls = _benches(run_with_stand_in(SCRIPT, FLAGS_STAND_IN, tmp_path, out, {"STEPS": "held early"}, cwd=ROOT))
    assert len(calls) == 4
    assert calls[0].startswith("verify_throughput.py") and "--phases kernelwright,kernelwright_unheld" in calls[0]
    assert calls[1].startswith("verify_fixtures.py") and calls[1].endswith("--no-held-timed-outputs")
    assert calls[2].startswith("verify_throughput.py")
    assert "--phases kernelwright,kernelwright_full_clock,kernelbench_best_mode" in calls[2]
    assert calls[3].startswith("verify_fixtures.py") and calls[3].endswith("--no-early-stop-clock")
    assert (out / "verify_fixtures_unheld_outputs.json").is_file()
    assert (out / "verify_fixtures_full_clock.json").is_file()
