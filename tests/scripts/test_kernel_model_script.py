"""scripts/kernel_model_gpu.sh's order of work, with a stand-in interpreter that records each kernelwright
command and writes what the real one would (the script's own Python snippets run for real): each mode
trains on its reading's data, every generation ends before any check starts, the checks run side by side
(the longest, infill, first; only the compositions' gate), the judge's workers are the cores shared out,
jobs are spread over the GPUs given, no champion means no serve step, and a second run redoes nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts.stand_in import run_with_stand_in

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kernel_model_gpu.sh"
STAND_IN = r"""#!/usr/bin/env bash
args=("$@")
get() { local i; for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[$i]}" = "$1" ] && echo "${args[$((i + 1))]}"; done; }
log() { echo "$1 $2" >> "$LOG"; }
case " $* " in
    " - "*) exec "$REAL_PYTHON" "$@" ;;  # the script's own snippets
    *" bench/rl_vs_start.py "*) exec "$REAL_PYTHON" "$@" ;;  # RL's start and its comparison, as they are
    *" -c "*) [ -n "${CHAMPION:-}" ] ;;  # the champion check: there is one only when told
    *" --no-gate --out "*champion-seed-heldout*) mkdir -p "$(get --out)"; sleep "${SEED_S:-0}"; log seed-tasks - ;;
    *" --no-gate --out "*champion-builtin*) mkdir -p "$(get --out)"; log builtin "$(get --suite)" ;;
    *".cli serve"*) log serve -; sleep 30 ;;
    *serve_compile_rate*) log serve-check "$(get --count)"; echo '{}' > "$(get --json)" ;;
    *" base-model pretrain "*) mkdir -p "$(get --out)"; log pretrain "require=$(get --require-sources)"
                               get --max-steps > "$(get --out)/max_steps"; true ;;
    *".cli rl "*) log rl-start -; sleep 0.3; [ -z "${FAIL_RL:-}" ] || exit 4; mkdir -p "$(get --out)/final"
                  accum="$(get --gradient-accumulation-steps)"
                  minutes="$(get --max-minutes)$(get --infill-kinds)$(get --eval-items)"
                  log rl "accum=$accum:infill=$(get --infill-steps):minutes=$minutes:$(basename "$(get --model)")" ;;
    *" synthesize "*) s="$(get --workdir)/synthesize"
        for i in 1 2 3 4; do
            mkdir -p "$s/heldout/elementwise" "$s/heldout_solutions/elementwise_$i" "$s/infill/heldout/t$i" "$s/train" \
                     "$s/infill/train/t$i"
            echo "x = $i" > "$s/heldout/elementwise/elementwise_$i.py"
            echo "y = $i" > "$s/heldout_solutions/elementwise_$i/solution.py"
        done
        echo '{}' > "$s/manifest.json"; log synthesize - ;;
    *" curate "*) mkdir -p "$(get --out)"; log curate "$(get --mask-target):$(basename "$(get --out)")"
                  for a in "$@"; do
                      [[ "$a" == */infill/train* ]] && log curate-infill "$(basename "$(get --out)"):$(ls "$a" | wc -l)"
                  done; true ;;
    *" train "*) d="$(get --output-dir)"; log train-start "$(basename "$d"):$(basename "$(get --data)")"
                 log gpu "train:$(basename "$d"):${CUDA_VISIBLE_DEVICES-unset}"; sleep 0.2
                 mkdir -p "$d/final"; log train-end "$(basename "$d")" ;;
    *heldout_token_nll*) echo '{}' > "$(get --json)"; log nll - ;;
    *" --generate-only "*) o="$(get --out)"; log gen-start "$(basename "$o")"
                           log gpu "gen:$(basename "$o"):${CUDA_VISIBLE_DEVICES-unset}"; sleep 0.2
                           mkdir -p "$o/generations"; echo '{}' > "$o/generations/generation.json"
                           log gen-end "$(basename "$o")" ;;
    *" --generations "*) o="$(get --out)"; g=gate; [[ " $* " == *" --no-gate "* ]] && g=no-gate
                         log check-start "$(basename "$o"):$g:jobs=$(get --jobs):baseline=$(get --compile-baseline)"
                         log gpu "check:$(basename "$o"):${CUDA_VISIBLE_DEVICES-unset}"
                         sleep 0.2
                         echo '{"metrics": {"fast_0": 0.0, "compile_rate": 0.5}}' > "$o/results.json"
                         log check-end "$(basename "$o")" ;;
    *cuset_ablation*) log table - ;;
    *chain_fidelity*) log fidelity "$(basename "$(get --json)")" ;;
    *) echo "unexpected: $*" >&2; exit 3 ;;
esac
"""


def _run(tmp_path: Path, workdir: Path, parallel: int, **extra: str) -> list[tuple[str, str]]:
    env = {"REAL_PYTHON": sys.executable, "PARALLEL": str(parallel), "SMOKE": "1", "SEEDS": "0", "EVAL_PROBLEMS": "2",
           "PYTHONPATH": str(ROOT), **extra}
    return run_with_stand_in(SCRIPT, STAND_IN, tmp_path, workdir, env, cwd=ROOT)


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_the_recipes_order_of_work_gating_and_resumption(tmp_path: Path) -> None:
    workdir = tmp_path / "model work"
    calls = _run(tmp_path, workdir, parallel=3, TRAIN_INFILL="1")
    kinds = [k for k, _ in calls]
    args = dict.fromkeys(kinds)
    assert sorted(a for k, a in calls if k == "curate") == ["confident:curated-confident",
                                                            "uncertain:curated-heldout", "uncertain:curated-uncertain"]
    assert sorted(a for k, a in calls if k == "train-start") == [
        "cuset:curated-uncertain", "cusetA:curated-confident", "plain:curated-uncertain", "region:curated-uncertain"]
    assert max(i for i, k in enumerate(kinds) if k == "train-end") < min(i for i, k in enumerate(kinds)
                                                                         if k == "gen-start")
    assert max(i for i, k in enumerate(kinds) if k == "gen-end") < min(i for i, k in enumerate(kinds)
                                                                       if k == "check-start")
    checks = [a for k, a in calls if k == "check-start"]
    assert len(checks) == 8 and kinds.count("gen-start") == 8
    jobs = max(1, int(subprocess.run(["nproc"], capture_output=True, text=True).stdout) // 4)  # 3 infill + 1 synth
    assert all(c.endswith(f":jobs={jobs}:baseline=false") for c in checks)
    assert {c.split(":")[1] for c in checks if "-synth:" in c} == {"gate"}
    assert {c.split(":")[1] for c in checks if "-infill:" in c} == {"no-gate"}
    running = 0
    for kind, _ in calls:  # PARALLEL + 1 checks at a time (the gates themselves take turns: the registry's lock)
        running += {"check-start": 1, "check-end": -1}.get(kind, 0)
        assert running <= 4
    suites = [a.split(":")[0].rsplit("-", 1)[1] for k, a in calls if k == "check-start"]
    assert suites == ["infill"] * 4 + ["synth"] * 4  # the longest checks first
    assert {a.rsplit(":", 1)[1] for k, a in calls if k == "gpu"} == {"unset"}  # no GPUS: every job sees them all
    assert (workdir / "synthesize" / "heldout_eval_solutions").is_dir()
    assert (workdir / "evaluate-seed0-cusetA-infill" / "results.json").is_file()
    assert "nll" in args and kinds[-2:] == ["table", "fidelity"]  # no champion: no evaluation of it, no server
    again = [k for k, _ in _run(tmp_path, workdir, parallel=3, TRAIN_INFILL="1")]
    assert again == ["pretrain", "table", "fidelity"]  # pretraining reuses its base; the tables are read again


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_the_corpus_sources_the_base_must_read_are_checked_before_any_work(tmp_path: Path) -> None:
    calls = _run(tmp_path, tmp_path / "w1", parallel=1, MODES="plain", CORPUS_SOURCES="torch-nn")  # torch is here
    assert [a for k, a in calls if k == "pretrain"] == ["require=torch-nn"]
    assert [a for k, a in _run(tmp_path, tmp_path / "w2", parallel=1, MODES="plain") if k == "pretrain"] == [
        "require="]  # a smoke run requires nothing unless told
    missing = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "w3")], cwd=ROOT, capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin", "SMOKE": "1", "CORPUS_SOURCES": "torch-nn no-such",
                                  "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)})
    assert missing.returncode == 2 and "CORPUS_SOURCES: --require-sources: unknown source(s) no-such" in missing.stderr
    assert not (tmp_path / "w3" / "base").exists()


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_pretraining_takes_a_step_bound_beside_its_minutes(tmp_path: Path) -> None:
    """PRETRAIN_STEPS bounds the base's steps, so runs on machines of other speeds read the same tokens; unset,
    the minutes alone decide (0 steps: no bound)."""
    _run(tmp_path, tmp_path / "w1", parallel=1, MODES="plain", PRETRAIN_STEPS="700")
    _run(tmp_path, tmp_path / "w2", parallel=1, MODES="plain")
    assert (tmp_path / "w1" / "base" / "max_steps").read_text().strip() == "700"
    assert (tmp_path / "w2" / "base" / "max_steps").read_text().strip() == "0"


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_whole_kernels_only_leaves_the_infill_tasks_out_of_training(tmp_path: Path) -> None:
    with_infill = _run(tmp_path, tmp_path / "w1", parallel=2, MODES="plain", TRAIN_INFILL="1")
    assert [a for k, a in with_infill if k == "curate-infill"] == ["curated-uncertain:4"]
    calls = _run(tmp_path, tmp_path / "w2", parallel=2, MODES="plain cusetSoft", TRAIN_INFILL="0")
    assert not [a for k, a in calls if k == "curate-infill"]
    assert sorted(a for k, a in calls if k == "train-start") == [
        "cusetSoft:curated-soft-noinfill", "plain:curated-uncertain-noinfill"]
    checked = [a.split(":")[0] for k, a in calls if k == "check-start"]
    assert sorted(checked) == ["evaluate-seed0-cusetSoft-synth", "evaluate-seed0-plain-synth"]  # no infill suite


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_a_share_of_the_infill_tasks_is_drawn_once(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    calls = _run(tmp_path, workdir, parallel=1, MODES="plain", TRAIN_INFILL="0.5")
    assert [a for k, a in calls if k == "curate-infill"] == ["curated-uncertain-infill0.5:2"]
    assert [a for k, a in calls if k == "train-start"] == ["plain:curated-uncertain-infill0.5"]
    drawn = sorted(p.name for p in (workdir / "synthesize" / "infill" / "train-share0.5").iterdir())
    _run(tmp_path, workdir, parallel=1, MODES="plain", TRAIN_INFILL="0.5")
    assert sorted(p.name for p in (workdir / "synthesize" / "infill" / "train-share0.5").iterdir()) == drawn
    default = _run(tmp_path, tmp_path / "w4", parallel=1, MODES="plain")  # a fifth of them unless told
    assert [a for k, a in default if k == "curate-infill"] == ["curated-uncertain-infill0.2:1"]
    bad = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "w3")], cwd=ROOT, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "SMOKE": "1", "TRAIN_INFILL": "half", "PYTHON": "true"})
    assert bad.returncode == 2 and "TRAIN_INFILL must be" in bad.stderr


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_rl_starts_from_the_best_version_with_a_step_of_several_micro_batches(tmp_path: Path) -> None:
    calls = _run(tmp_path, tmp_path / "w1", parallel=1, MODES="plain", RL_STEPS="2", RL_MINUTES="7.5",
                 RL_INFILL_KINDS="index_guard", RL_EVAL_ITEMS="4")
    assert [a for k, a in calls if k == "rl"] == ["accum=8:infill=:minutes=7.5index_guard4:final"]  # plain's model
    compared = json.loads((tmp_path / "w1" / "rl_vs_start.json").read_text())
    assert compared["start_version"] == "0-plain" and set(compared) >= {"synth", "infill"}  # both suites its start had
    assert compared["infill"]["start"] == compared["infill"]["rl"] == {"fast_0": 0.0, "compile_rate": 0.5}
    rl_checks = [a.split(":")[:2] for k, a in calls if k == "check-start" and a.startswith("rl-evaluate")]
    assert sorted(rl_checks) == [["rl-evaluate-infill", "no-gate"], ["rl-evaluate-synth", "gate"]]
    whole = _run(tmp_path, tmp_path / "w2", parallel=1, MODES="plain", RL_STEPS="2", TRAIN_INFILL="0", RL_ACCUM="4")
    assert [a for k, a in whole if k == "rl"] == ["accum=4:infill=0:minutes=:final"]  # no infill: no infill phase
    assert set(json.loads((tmp_path / "w2" / "rl_vs_start.json").read_text())) & {"synth", "infill"} == {"synth"}
    with pytest.raises(AssertionError):  # a failed RL run stops the recipe; it is not evaluated as if it had ended
        _run(tmp_path, tmp_path / "w3", parallel=1, MODES="plain", RL_STEPS="2", FAIL_RL="1")
    assert not (tmp_path / "w3" / "rl-evaluate-synth").exists()


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_rl_from_the_only_version_starts_beside_its_evaluations(tmp_path: Path) -> None:
    def last_check_of_a_version(calls: list[tuple[str, str]]) -> int:
        return max(i for i, (k, a) in enumerate(calls) if k == "check-end" and a.startswith("evaluate-seed"))

    calls = _run(tmp_path, tmp_path / "w1", parallel=1, MODES="plain", RL_STEPS="2")
    kinds = [k for k, _ in calls]
    assert kinds.index("rl-start") < max(i for i, k in enumerate(kinds) if k == "gen-end")  # one version: no choice
    assert (tmp_path / "w1" / "rl_vs_start.json").is_file() and kinds.count("rl-start") == 1
    apart = _run(tmp_path, tmp_path / "w2", parallel=1, MODES="plain", RL_STEPS="2", RL_BESIDE="0")
    assert [k for k, _ in apart].index("rl-start") > last_check_of_a_version(apart)
    chosen = _run(tmp_path, tmp_path / "w3", parallel=2, MODES="plain region", RL_STEPS="2")
    assert [k for k, _ in chosen].index("rl-start") > last_check_of_a_version(chosen)  # after the choice
    named = _run(tmp_path, tmp_path / "w5", parallel=2, MODES="plain region", RL_STEPS="2", RL_FROM="0-region")
    named_kinds = [k for k, _ in named]  # a start named ahead: no choice to wait for
    assert named_kinds.index("rl-start") < max(i for i, k in enumerate(named_kinds) if k == "gen-end")
    assert json.loads((tmp_path / "w5" / "rl_vs_start.json").read_text())["start_version"] == "0-region"
    with pytest.raises(AssertionError):  # a start that is not trained is refused before any work
        _run(tmp_path, tmp_path / "w6", parallel=1, MODES="plain", RL_STEPS="2", RL_FROM="1-plain")
    assert not (tmp_path / "w6" / "base").exists()
    with pytest.raises(AssertionError):  # a failed RL run beside the evaluations still stops the recipe
        _run(tmp_path, tmp_path / "w4", parallel=1, MODES="plain", RL_STEPS="2", FAIL_RL="1")
    assert not (tmp_path / "w4" / "rl-evaluate-synth").exists()


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_one_version_checks_both_suites_at_once_with_the_cores_shared(tmp_path: Path) -> None:
    """The infill suite's check waited for the compositions' (side_by_side counted their job as its own)."""
    calls = _run(tmp_path, tmp_path / "w", parallel=1, MODES="plain")
    starts = {a.split(":")[0]: i for i, (k, a) in enumerate(calls) if k == "check-start"}
    ends = {a: i for i, (k, a) in enumerate(calls) if k == "check-end"}
    assert starts["evaluate-seed0-plain-infill"] < ends["evaluate-seed0-plain-synth"]
    assert starts["evaluate-seed0-plain-synth"] < ends["evaluate-seed0-plain-infill"]
    jobs = max(1, int(subprocess.run(["nproc"], capture_output=True, text=True).stdout) // 2)
    assert {a.split(":")[2] for k, a in calls if k == "check-start"} == {f"jobs={jobs}"}


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_jobs_are_spread_over_the_gpus_given(tmp_path: Path) -> None:
    """With GPUS, the job in place k of its PARALLEL sees GPU k modulo their count: two of four on each."""
    calls = _run(tmp_path, tmp_path / "w", parallel=4, GPUS="0 1", TRAIN_INFILL="1")
    placed = [a.split(":") for k, a in calls if k == "gpu"]
    assert sorted(gpu for what, _, gpu in placed if what == "train") == ["0", "0", "1", "1"]
    assert {gpu for what, _, gpu in placed if what in ("gen", "check")} == {"0", "1"}
    on: dict[str, str] = {}
    running = {"0": 0, "1": 0}
    for kind, arg in calls:  # at most three of the five checks at a time on one GPU (places 0, 2, 4)
        if kind == "gpu" and arg.startswith("check:"):
            _, name, gpu = arg.split(":")
            on[name] = gpu
            running[gpu] += 1
            assert running[gpu] <= 3
        elif kind == "check-end":
            running[on[arg]] -= 1


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("nproc") is None, reason="needs bash and nproc")
def test_the_champion_is_evaluated_on_seed_tasks_and_builtin_suite_and_served_unless_told_not(tmp_path: Path) -> None:
    calls = _run(tmp_path, tmp_path / "w1", parallel=1, MODES="plain", CHAMPION="1", SERVE_PROBLEMS="5",
                 SEED_S="3")
    # the server starts in the background: its own line may come after the check's, or not before it is stopped;
    # its check runs beside the evaluations, so it ends while the (3 s) seed tasks are still being evaluated
    ran = [(k, a) for k, a in calls if k in ("seed-tasks", "builtin", "serve-check")]
    assert ran == [("serve-check", "5"), ("seed-tasks", "-"), ("builtin", "builtin")]
    skipped = _run(tmp_path, tmp_path / "w2", parallel=1, MODES="plain", CHAMPION="1", SEED_SAMPLES="0",
                   BUILTIN_SAMPLES="0", SERVE_PROBLEMS="0")  # an ablation's lease: none of them
    assert not [k for k, _ in skipped if k in ("seed-tasks", "builtin", "serve", "serve-check")]
