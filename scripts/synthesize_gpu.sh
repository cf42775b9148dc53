#!/usr/bin/env bash
# The verified synthetic corpus on one CUDA host, from nothing, as one resumable command.
#
#     bash scripts/synthesize_gpu.sh [WORKDIR] [OUT]     # default WORKDIR ./.kernelwright-synth
#
# 1. the synthesis GPU tests (trusted batches of seed solutions; a broken, a wrong and a degenerate one);
# 2. `kernelwright synthesize --tasks $TASKS` (default 6000): tasks drawn, split by signature,
#    decontaminated, every solution verified in trusted batches on the GPU, infill tasks cut; its
#    checks are appended as chunks finish, so a time-boxed call that is cut short resumes;
# 3. OUT (default WORKDIR/out) gets the run's manifest, summary, speedup plot, the pairs table and
#    the gzipped MLflow store: the files worth bringing back.
# Env: TASKS, JOBS (worker processes, default one per core up to 16), GPU_TESTS (0: skip step 1), PYTHON.
set -euo pipefail
W=${1:-./.kernelwright-synth}
OUT=${2:-$W/out}
PYTHON=${PYTHON:-python3}
TASKS=${TASKS:-6000}
mkdir -p "$W" "$OUT"
if [ "${GPU_TESTS:-1}" = 1 ] && [ ! -f "$W/.gpu-tests-passed" ]; then
  "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu tests/synthesis | tail -15
  touch "$W/.gpu-tests-passed"
fi
start=$(date +%s)
"$PYTHON" -m kernelwright.cli synthesize --tasks "$TASKS" --workdir "$W" ${JOBS:+--jobs "$JOBS"} 2>&1 \
  | tee "$OUT/synthesize.log" | grep -v "^checked" || true
"$PYTHON" - "$W" "$OUT" "$start" <<'PY'
import gzip, json, shutil, sys, time
from pathlib import Path
w, out, start = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
syn = w / "synthesize"
for name in ("manifest.json", "result.json", "speedup_distribution.png", "pairs.parquet"):
    if (syn / name).is_file():
        shutil.copy(syn / name, out / name)
checks = w / "synthesize.checks.jsonl"
if checks.is_file():
    with open(checks, "rb") as src, gzip.open(out / "synthesize_checks.jsonl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
if (w / "mlflow.db").is_file():
    with open(w / "mlflow.db", "rb") as src, gzip.open(out / "synthesize_mlflow.db.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
print(json.dumps({"command_wall_s": round(time.time() - start, 1)}))
PY
