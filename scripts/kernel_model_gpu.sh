#!/usr/bin/env bash
# A model that writes kernels, and CuSeT measured on it: from nothing on one CUDA host, resumable.
#
#     bash scripts/kernel_model_gpu.sh [WORKDIR]          # default WORKDIR: ./.kernelwright-model
#
# 1. pretrains the `small` base (PRETRAIN_MINUTES) on the installed packages' code (with the
#    `corpus` extra's CUTLASS, CCCL and FlashInfer sources where they are installed);
# 2. `kernelwright synthesize --tasks TASKS`: verified procedural pairs, the held-out compositions
#    and the infill suites (trusted batches on this GPU);
# 3. curates the seed corpus's training split, the synthesized training pairs and their infill tasks
#    twice with that base:
#    reading B (`--mask-target uncertain`, the default) and reading A (`--mask-target confident`);
# 4. trains, for each seed in SEEDS: plain, region and cuset on reading B's data, cuset on reading
#    A's (`train --ablation`), every version registered;
# 5. evaluates every version on EVAL_PROBLEMS held-out compositions and EVAL_PROBLEMS held-out infill
#    tasks (a fixed sample of each, the same for every version), SAMPLES candidates each, through
#    the full judge: first all generations, then all checks (checks time one at a time across
#    processes, so PARALLEL changes the wall clock only);
# 6. the table over seeds (bench/cuset_ablation.py reads every evaluate-* folder), under one
#    `cuset-ablation` parent run in WORKDIR/mlflow.db.
# A step whose output is there is skipped, and pretraining, synthesis and training resume from their
# checkpoints, so the recipe runs as several time-boxed calls on one host:
#     PRETRAIN_MINUTES=6 timeout 580 bash scripts/kernel_model_gpu.sh W
# Env: PRETRAIN_MINUTES (default 8), TASKS (3000), STEPS (600), SEEDS ("0 1 2"), SAMPLES (1),
# EVAL_PROBLEMS (100), MAX_NEW_TOKENS (1536), EVAL_BATCH (64), PARALLEL (2), PYTHON,
# SMOKE=1 (a CPU smoke run: tiny base, unverified pairs, NVRTC-only checks; never for figures).
set -euo pipefail

WORKDIR="${1:-.kernelwright-model}"
PRETRAIN_MINUTES="${PRETRAIN_MINUTES:-8}"
TASKS="${TASKS:-3000}"
STEPS="${STEPS:-600}"
SEEDS="${SEEDS:-0 1 2}"
SAMPLES="${SAMPLES:-1}"
EVAL_PROBLEMS="${EVAL_PROBLEMS:-100}"
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-1536}"
EVAL_BATCH="${EVAL_BATCH:-64}"
PARALLEL="${PARALLEL:-2}"
PY="${PYTHON:-.venv/bin/python}"
KW="$PY -m kernelwright.cli"
BASE="$WORKDIR/base"
SYN="$WORKDIR/synthesize"
export KERNELWRIGHT_WORKDIR="$WORKDIR"
mkdir -p "$WORKDIR"

if [ "${SMOKE:-0}" = 1 ]; then
    SIZE=tiny; VERIFY=none; ALLOW=--allow-unverified
else
    $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: this script is for a GPU host')"
    SIZE=small; VERIFY=gpu; ALLOW=
fi

$KW base-model pretrain --size "$SIZE" --minutes "$PRETRAIN_MINUTES" --out "$BASE" --workdir "$WORKDIR"
[ -e "$SYN/manifest.json" ] || $KW synthesize --tasks "$TASKS" --verify "$VERIFY" --workdir "$WORKDIR"

# the evaluation samples: the same EVAL_PROBLEMS held-out compositions and infill tasks for every version
[ -d "$SYN/heldout_eval" ] || "$PY" - "$SYN" "$EVAL_PROBLEMS" <<'PY'
import random, shutil, sys
from pathlib import Path
syn, n = Path(sys.argv[1]), int(sys.argv[2])
problems = sorted((syn / "heldout").rglob("*.py"))
for p in random.Random(0).sample(problems, min(n, len(problems))):
    dest = syn / "heldout_eval" / p.relative_to(syn / "heldout")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(p, dest)
tasks = sorted(d for d in (syn / "infill" / "heldout").iterdir() if d.is_dir())
for d in random.Random(0).sample(tasks, min(n, len(tasks))):
    shutil.copytree(d, syn / "infill" / "heldout_eval" / d.name)
PY

[ -d "$WORKDIR/seed-train" ] || "$PY" - "$WORKDIR/seed-train" <<'PY'
import shutil, sys
from kernelwright.seed import load_seed_tasks, split_tasks
for t in split_tasks(load_seed_tasks())[0]:  # the seed corpus's training split: its held-out tasks stay out
    shutil.copytree(t.path, f"{sys.argv[1]}/{t.id}")
PY

for reading in uncertain confident; do
    out="$WORKDIR/curated-$reading"
    [ -e "$out/.done" ] && continue
    $KW curate --base-model "$BASE" --split train --input "$SYN/train" --input "$SYN/infill/train" --input "$WORKDIR/seed-train" \
        --mask-target "$reading" $ALLOW --out "$out" --workdir "$WORKDIR"
    touch "$out/.done"
done

side_by_side() {  # FN ARG for each ARG, at most PARALLEL at a time; the first failure stops the script
    local fn="$1" arg
    shift
    for arg in "$@"; do
        while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
        "$fn" "$arg" &
    done
    while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; done
}

train_seed() {  # SEED: plain, region, cuset on reading B's data; cuset on reading A's
    local dir="$WORKDIR/train-seed$1"
    [ -d "$dir/cuset/final" ] || $KW train --ablation plain,region,cuset --seed "$1" --base-model "$BASE" \
        --data "$WORKDIR/curated-uncertain" --max-steps "$STEPS" --output-dir "$dir" --workdir "$WORKDIR"
    [ -d "$dir/cusetA/final" ] || $KW train --weighting cuset --seed "$1" --base-model "$BASE" \
        --data "$WORKDIR/curated-confident" --max-steps "$STEPS" --output-dir "$dir/cusetA" --workdir "$WORKDIR"
}

final_of() {  # SEED-MODE -> the trained model folder
    local seed="${1%%-*}" mode="${1#*-}"
    if [ "$mode" = cusetA ]; then echo "$WORKDIR/train-seed$seed/cusetA/final"; else
        echo "$WORKDIR/train-seed$seed/$mode/final"; fi
}

generate_version() {  # SEED-MODE-SUITE
    local v="${1%-*}" suite="${1##*-}" out="$WORKDIR/evaluate-seed$1"
    { [ -e "$out/.done" ] || [ -e "$out/generations/generation.json" ]; } && return 0
    $KW evaluate --model "$(final_of "$v")" --suite "$suite:heldout_eval" --generate-only --samples "$SAMPLES" \
        --temperature 0.7 --max-new-tokens "$MAX_NEW_TOKENS" --batch-size "$EVAL_BATCH" --seed "${v%%-*}" \
        --out "$out" --workdir "$WORKDIR"
}

check_version() {  # SEED-MODE-SUITE
    local v="${1%-*}" suite="${1##*-}" out="$WORKDIR/evaluate-seed$1"
    [ -e "$out/.done" ] && return 0
    $KW evaluate --model "$(final_of "$v")" --suite "$suite:heldout_eval" --generations "$out/generations" \
        --samples "$SAMPLES" --seed "${v%%-*}" --out "$out" --workdir "$WORKDIR"
    touch "$out/.done"
}

read -r -a SEED_LIST <<< "$SEEDS"
side_by_side train_seed "${SEED_LIST[@]}"
VERSIONS=()
for s in "${SEED_LIST[@]}"; do
    for m in plain region cuset cusetA; do
        for suite in synth infill; do VERSIONS+=("$s-$m-$suite"); done
    done
done
side_by_side generate_version "${VERSIONS[@]}"
side_by_side check_version "${VERSIONS[@]}"
PYTHONPATH=".:${PYTHONPATH:-}" $PY bench/cuset_ablation.py "$WORKDIR" \
    --json "$WORKDIR/cuset_ablation.json" --png "$WORKDIR/cuset_ablation.png" --markdown "$WORKDIR/cuset_ablation.md" \
    --tracking-uri "sqlite:///$(cd "$WORKDIR" && pwd)/mlflow.db" || \
    echo "the table: bench/cuset_ablation.py could not read these folders; the evaluate-* runs are in MLflow"
echo "done: MLflow store $WORKDIR/mlflow.db (kernelwright mlflow-server --workdir $WORKDIR)"
