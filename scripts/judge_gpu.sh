#!/usr/bin/env bash
# The judge's figures on one CUDA host, as one resumable command.
#
#     bash scripts/judge_gpu.sh [OUT]     # default OUT ./.kernelwright-judge
#
# Each step writes its JSON into OUT and is skipped when that file is there, so a time-boxed call
# that is cut short resumes with the next step:
# 1. throughput: 32 seed candidates, 16 workers, kernelwright three times and KernelBench's best
#    mode once (verify_throughput.json); then kernelwright once with split builds' host files keeping
#    their pybind11 bindings after the slim header instead of the generic bindings after the bare one
#    (verify_throughput_slim_header.json: the A/B of cuda/host_bindings.py); then kernelwright twice
#    with judges and runners spinning through every GPU wait (verify_throughput_spin_wait.json: the
#    A/B of verifier/gpu_wait.py); then kernelwright twice with the GPU gate on
#    (verify_throughput_gpu_gate.json: the A/B of verifier/gpu_gate.py, step `gate`, not in the default STEPS);
# 2. every fixture FIXTURE_RUNS times, each run with a fresh build cache (verify_fixtures_runsN.json;
#    the bench exits 1 naming any candidate whose verdict missed, which does not stop the rest);
# 3. the timer bound's calibration: every honest candidate under 16 workers, twice
#    (timer_bound_calibration.json), then the launch-bound kernels and the fixtures alone, and
#    the first CALIBRATION_ALONE seed solutions alone, added to the same file;
# 4. timing fidelity: our timer against triton's do_bench on the suite's ops (timing_fidelity.json);
# 5. the clock under 16 workers, with the GPU gate off and then on: the seed solutions once each
#    with the timer's bound off, how many read above it (timer_bound_calibration_seeds_parallel.json,
#    ..._gpu_gate.json; step `clock`, not in the default STEPS);
# 6. where the CPU goes: kernelwright once plain, then once with a cProfile of every judge and runner, added up
#    per role (verify_throughput_profiled.json, its `cpu_profile`; step `profile`, not in the default STEPS);
# 7. inputs made on the GPU against on the host: kernelwright and kernelwright with `gpu_inputs` off, twice each
#    (verify_throughput_gpu_inputs.json: the A/B of judge 21's draws; step `inputs`, not in the default STEPS);
# 8. the trials' outputs held by the runner and 8 read back (held_timed_outputs, on since judge 22) against every
#    timed output read back under the lock: kernelwright and kernelwright with it off, twice each
#    (verify_throughput_held_outputs.json), then every fixture once with it off (verify_fixtures_unheld_outputs.json;
#    step `held`, not in the default STEPS; the `fixtures` step runs them with it on);
# 9. the judge's clock ending its rounds once the timer reads within its bound (early_stop_clock, on since judge
#    23) against every round run: kernelwright and kernelwright with it off, twice each, and KernelBench's best
#    mode once, so that both ratios come from one run (verify_throughput_early_clock.json), then every fixture
#    once with it off (verify_fixtures_full_clock.json; step `early`, not in the default STEPS; the `fixtures`
#    step runs them with it on).
# The steps run in the order STEPS names them (`STEPS="fixtures throughput"`: the fixtures first); a name
# that is no step ends the script before any work.
# Env: JOBS (default 16), PYTHON, STEPS (default "throughput header wait fixtures calibration fidelity"),
# CALIBRATION_ALONE (seed solutions verified alone, default 16), FIXTURE_RUNS (default 3).
set -uo pipefail
OUT=${1:-./.kernelwright-judge}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-16}
STEPS=${STEPS:-throughput header wait fixtures calibration fidelity}
ALONE=${CALIBRATION_ALONE:-16}
FIXTURE_RUNS=${FIXTURE_RUNS:-3}
mkdir -p "$OUT"

step() {  # step NAME FILE COMMAND...: run COMMAND unless FILE exists; its log beside FILE (.log)
  local name=$1 json=$2
  shift 2
  if [ -f "$json" ]; then
    echo "== $name: $json is there, skipped"
    return 0
  fi
  echo "== $name: $*"
  local start=$SECONDS log="${json%.*}.log"
  "$@" > "$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  tail -n 25 "$log"
}

throughput_step() {  # throughput_step NAME FILE REPEATS PHASES: bench/verify_throughput.py on the 32 seed candidates
  step "$1" "$OUT/$2" "$PYTHON" bench/verify_throughput.py --candidates 32 --jobs "$JOBS" --warm-header \
    --repeat "$3" --phases "$4" --json "$OUT/$2"
}

run_throughput() { throughput_step throughput verify_throughput.json 3 kernelwright,kernelbench_best_mode; }
run_header() { throughput_step header verify_throughput_slim_header.json 1 kernelwright_slim; }
run_wait() { throughput_step wait verify_throughput_spin_wait.json 2 kernelwright_spin; }
run_gate() { throughput_step gate verify_throughput_gpu_gate.json 2 kernelwright,kernelwright_gate; }
run_fixtures() {
  step fixtures "$OUT/verify_fixtures_runs$FIXTURE_RUNS.json" \
    "$PYTHON" bench/verify_fixtures.py --jobs "$JOBS" --runs "$FIXTURE_RUNS" \
    --json "$OUT/verify_fixtures_runs$FIXTURE_RUNS.json"
}
run_calibration() {
  step calibration "$OUT/timer_bound_calibration.parallel.done" \
    bash -c "'$PYTHON' bench/timer_bound_calibration.py --modes parallel --jobs $JOBS --repeat 2 \
      --json '$OUT/timer_bound_calibration.json'; touch '$OUT/timer_bound_calibration.parallel.done'"
  step calibration "$OUT/timer_bound_calibration.alone.done" \
    bash -c "'$PYTHON' bench/timer_bound_calibration.py --groups launch_bound,fixtures --modes alone --repeat 1 \
      --keep --json '$OUT/timer_bound_calibration.json' \
      && '$PYTHON' bench/timer_bound_calibration.py --groups seeds --modes alone --repeat 1 --limit $ALONE \
      --keep --json '$OUT/timer_bound_calibration.json'; touch '$OUT/timer_bound_calibration.alone.done'"
}
run_fidelity() {
  step fidelity "$OUT/timing_fidelity.json" \
    "$PYTHON" bench/timing_fidelity.py --shapes all --budget-s 0.2 --json "$OUT/timing_fidelity.json"
}
run_clock() {
  step clock "$OUT/timer_bound_calibration_seeds_parallel.json" \
    "$PYTHON" bench/timer_bound_calibration.py --groups seeds --modes parallel --jobs "$JOBS" --repeat 1 \
    --json "$OUT/timer_bound_calibration_seeds_parallel.json"
  step clock "$OUT/timer_bound_calibration_seeds_parallel_gpu_gate.json" \
    "$PYTHON" bench/timer_bound_calibration.py --groups seeds --modes parallel --jobs "$JOBS" --repeat 1 --gpu-gate \
    --json "$OUT/timer_bound_calibration_seeds_parallel_gpu_gate.json"
}
run_profile() { throughput_step profile verify_throughput_profiled.json 1 kernelwright,kernelwright_profiled; }
run_inputs() { throughput_step inputs verify_throughput_gpu_inputs.json 2 kernelwright,kernelwright_host_inputs; }
run_held() {
  throughput_step held verify_throughput_held_outputs.json 2 kernelwright,kernelwright_unheld
  step held "$OUT/verify_fixtures_unheld_outputs.json" \
    "$PYTHON" bench/verify_fixtures.py --jobs "$JOBS" --runs 1 --no-held-timed-outputs \
    --json "$OUT/verify_fixtures_unheld_outputs.json"
}

run_early() {
  throughput_step early verify_throughput_early_clock.json 2 kernelwright,kernelwright_full_clock,kernelbench_best_mode
  step early "$OUT/verify_fixtures_full_clock.json" \
    "$PYTHON" bench/verify_fixtures.py --jobs "$JOBS" --runs 1 --no-early-stop-clock \
    --json "$OUT/verify_fixtures_full_clock.json"
}

KNOWN="throughput header wait gate fixtures calibration fidelity clock profile inputs held early"
for name in $STEPS; do
  case " $KNOWN " in *" $name "*) ;; *) echo "judge_gpu.sh: unknown step '$name' in STEPS; the steps are: $KNOWN" >&2
                                       exit 2 ;; esac
done
for name in $STEPS; do
  "run_$name"
done
