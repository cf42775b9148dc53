#!/usr/bin/env bash
# Plain vs CuSeT on a pretrained `small` base, 3 seeds each, on one CUDA host, as one command sequence.
#
#     bash scripts/ablation_gpu.sh [WORKDIR]          # default WORKDIR: ./.kernelwright-ablation
#
# 1. pretrains the `small` base (~90M parameters, PRETRAIN_MINUTES budget) on the installed packages' code;
# 2. curates the seed train split with it (p_t, regions, masks, sample weights) and the test split
#    (for the held-out token NLL);
# 3. `kernelwright train --ablation plain,cuset` for seeds 0, 1, 2: child runs train[plain],
#    train[cuset] under one train-ablation parent run per seed, each version registered (PARALLEL
#    seeds side by side on the GPU);
# 4. the token-level NLL of every trained version on the held-out seed tasks, CUDA-sensitive vs other
#    tokens (bench/heldout_token_nll.py -> WORKDIR/heldout_nll.json);
# 5. evaluates every trained version on the held-out seed tasks with 4 samples each: first every
#    version's candidates (`evaluate --generate-only`, PARALLEL at a time), then their checks
#    (`evaluate --generations`, PARALLEL at a time). No generation overlaps a check, and checks time
#    kernels one at a time across processes (the verifier's host-wide timing lock), so running
#    side by side changes no timing, only the wall clock;
# 6. the table (bench/cuset_ablation.py), logged as one parent run over all of the above.
# Every step is an MLflow run in WORKDIR/mlflow.db; nothing here needs a network. Models stay on
# the host: run everything there, then bring back WORKDIR/mlflow.db and WORKDIR/evaluate-*/.
# Env: STEPS (training steps, default 300), SAMPLES (per held-out task, default 4), PRETRAIN_MINUTES
# (default 25), MAX_NEW_TOKENS (per completion, default 2048: every seed kernel fits), EVAL_BATCH (prompts per generate() call,
# default 64), PARALLEL (trainings, generations or checks at a time on the one GPU, default 1), PYTHON.
# Resumable: a step whose result is there is skipped (the base by its corpus digest and config, the
# others by their output), and pretraining and training resume from their checkpoints, so the
# sequence can run as several time-boxed commands on the same host, e.g. within one hour of a
# 10-minute-a-command GPU lease:  PRETRAIN_MINUTES=8 timeout 580 bash scripts/ablation_gpu.sh W
set -euo pipefail

WORKDIR="${1:-.kernelwright-ablation}"
STEPS="${STEPS:-300}"
SAMPLES="${SAMPLES:-4}"
PRETRAIN_MINUTES="${PRETRAIN_MINUTES:-25}"
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-2048}"
EVAL_BATCH="${EVAL_BATCH:-64}"
PARALLEL="${PARALLEL:-1}"
PY="${PYTHON:-.venv/bin/python}"
KW="$PY -m kernelwright.cli"
BASE="$WORKDIR/base-small"
export KERNELWRIGHT_WORKDIR="$WORKDIR"

$PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: this script is for a GPU host')"

$KW base-model pretrain --size small --minutes "$PRETRAIN_MINUTES" --out "$BASE" --workdir "$WORKDIR"
for split in train test; do
    [ -e "$WORKDIR/curated-$split/.done" ] && continue
    $KW curate --base-model "$BASE" --split "$split" --out "$WORKDIR/curated-$split" --workdir "$WORKDIR"
    touch "$WORKDIR/curated-$split/.done"
done

source "$(dirname "${BASH_SOURCE[0]}")/side_by_side.sh"

train_seed() {  # SEED: both weightings
    local dir="$WORKDIR/train-seed$1"
    [ -d "$dir/cuset/final" ] && [ -d "$dir/plain/final" ] && return 0
    $KW train --ablation plain,cuset --seed "$1" --base-model "$BASE" --data "$WORKDIR/curated-train" \
        --max-steps "$STEPS" --output-dir "$dir" --workdir "$WORKDIR"
}

generate_version() {  # SEED-MODE: its candidates, no check
    local seed="${1%-*}" mode="${1#*-}" out="$WORKDIR/evaluate-seed$1"
    { [ -e "$out/.done" ] || [ -e "$out/generations/generation.json" ]; } && return 0
    $KW evaluate --model "$WORKDIR/train-seed$seed/$mode/final" --generate-only --samples "$SAMPLES" \
        --temperature 0.8 --max-new-tokens "$MAX_NEW_TOKENS" --batch-size "$EVAL_BATCH" --seed "$seed" \
        --out "$out" --workdir "$WORKDIR"
}

check_version() {  # SEED-MODE: the checks of its candidates
    local seed="${1%-*}" mode="${1#*-}" out="$WORKDIR/evaluate-seed$1"
    [ -e "$out/.done" ] && return 0
    $KW evaluate --model "$WORKDIR/train-seed$seed/$mode/final" --generations "$out/generations" \
        --samples "$SAMPLES" --seed "$seed" --out "$out" --workdir "$WORKDIR"
    touch "$out/.done"
}

side_by_side train_seed 0 1 2

VERSIONS=(0-plain 0-cuset 1-plain 1-cuset 2-plain 2-cuset)
MODELS=()
for v in "${VERSIONS[@]}"; do MODELS+=("$WORKDIR/train-seed${v%-*}/${v#*-}/final"); done
# the primary figure: token-level NLL on the held-out seed tasks, sensitive vs other tokens, per version
[ -e "$WORKDIR/heldout_nll.json" ] || PYTHONPATH=".:${PYTHONPATH:-}" $PY bench/heldout_token_nll.py \
    --data "$WORKDIR/curated-test" "${MODELS[@]}" --json "$WORKDIR/heldout_nll.json"

side_by_side generate_version "${VERSIONS[@]}"
side_by_side check_version "${VERSIONS[@]}"
# the table (means and spread across seeds), under one `cuset-ablation` parent run with the others as children
PYTHONPATH=".:${PYTHONPATH:-}" $PY bench/cuset_ablation.py "$WORKDIR" \
    --json "$WORKDIR/cuset_ablation.json" --png "$WORKDIR/cuset_ablation.png" --markdown "$WORKDIR/cuset_ablation.md" \
    --tracking-uri "sqlite:///$(cd "$WORKDIR" && pwd)/mlflow.db"
echo "ablation done: MLflow store $WORKDIR/mlflow.db (kernelwright mlflow-server --workdir $WORKDIR)"
