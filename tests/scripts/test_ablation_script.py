"""scripts/ablation_gpu.sh's order of work, with a stand-in interpreter that records each command and
writes what the real one would: every generation ends before any check starts, PARALLEL runs that
many at a time, a second run redoes nothing, and a work folder with a space in its name works."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.scripts.stand_in import run_with_stand_in

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ablation_gpu.sh"
STAND_IN = r"""#!/usr/bin/env bash
args=("$@")
get() { local i; for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[$i]}" = "$1" ] && echo "${args[$((i + 1))]}"; done; }
log() { echo "$1 $2" >> "$LOG"; }
case " $* " in
    *" -c "*) ;;
    *" base-model pretrain "*) mkdir -p "$(get --out)"; log pretrain - ;;
    *" curate "*) mkdir -p "$(get --out)"; log curate "$(get --split)" ;;
    *" train "*) d="$(get --output-dir)"; log train-start "$(get --seed)"; sleep 0.3
                 mkdir -p "$d/plain/final" "$d/cuset/final"; log train-end "$(get --seed)" ;;
    *heldout_token_nll*) echo '{}' > "$(get --json)"; log nll - ;;
    *" --generate-only "*) o="$(get --out)"; log gen-start "$o"; sleep 0.3
                           mkdir -p "$o/generations"; echo '{}' > "$o/generations/generation.json"; log gen-end "$o" ;;
    *" --generations "*) o="$(get --out)"; log check-start "$o"; sleep 0.1; echo '{}' > "$o/results.json"
                         log check-end "$o" ;;
    *cuset_ablation*) log table - ;;
    *) echo "unexpected: $*" >&2; exit 3 ;;
esac
"""


def _run(tmp_path: Path, workdir: Path, parallel: int) -> list[tuple[str, str]]:
    return run_with_stand_in(SCRIPT, STAND_IN, tmp_path, workdir, {"PARALLEL": str(parallel)})


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_generations_end_before_checks_and_run_parallel_at_a_time(tmp_path: Path) -> None:
    workdir = tmp_path / "ablation work"
    calls = _run(tmp_path, workdir, parallel=3)
    kinds = [k for k, _ in calls]
    assert kinds.count("train-start") == 3 and kinds.count("gen-start") == 6 and kinds.count("check-start") == 6
    assert max(i for i, k in enumerate(kinds) if k == "gen-end") < min(i for i, k in enumerate(kinds)
                                                                       if k == "check-start")
    assert max(i for i, k in enumerate(kinds) if k == "train-end") < kinds.index("nll") < kinds.index("gen-start")
    running = peak = 0
    for kind in kinds:  # how many generations ran at once
        running += {"gen-start": 1, "gen-end": -1}.get(kind, 0)
        peak = max(peak, running)
    assert peak == 3
    for seed in range(3):
        for mode in ("plain", "cuset"):
            assert (workdir / f"evaluate-seed{seed}-{mode}" / "results.json").is_file()
    assert kinds[-1] == "table"
    again = [k for k, _ in _run(tmp_path, workdir, parallel=3)]
    assert again == ["pretrain", "table"]  # pretraining reuses its base itself; nothing else is redone


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_one_at_a_time_by_default(tmp_path: Path) -> None:
    kinds = [k for k, _ in _run(tmp_path, tmp_path / "w", parallel=1)]
    gens = [k for k in kinds if k.startswith("gen-")]
    assert gens == ["gen-start", "gen-end"] * 6
