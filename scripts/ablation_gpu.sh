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
KW="${PYTHON:-.venv/bin/python} -m kernelwright.cli"
BASE="$WORKDIR/base-small"
export KERNELWRIGHT_WORKDIR="$WORKDIR"

python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: this script is for a GPU host')"

$KW base-model pretrain --size small --minutes "$PRETRAIN_MINUTES" --out "$BASE" --workdir "$WORKDIR"
for split in train test; do
    [ -e "$WORKDIR/curated-$split/.done" ] && continue
    $KW curate --base-model "$BASE" --split "$split" --out "$WORKDIR/curated-$split" --workdir "$WORKDIR"
    touch "$WORKDIR/curated-$split/.done"
done

# at most PARALLEL of the commands given as arguments at a time; the first failure stops the script
side_by_side() {
    local cmd
    for cmd in "$@"; do
        while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
        bash -c "$cmd" &
    done
    while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; done
}

TRAIN=()
for seed in 0 1 2; do
    [ -d "$WORKDIR/train-seed$seed/cuset/final" ] && [ -d "$WORKDIR/train-seed$seed/plain/final" ] && continue
    TRAIN+=("$KW train --ablation plain,cuset --seed $seed --base-model $BASE --data $WORKDIR/curated-train \
        --max-steps $STEPS --output-dir $WORKDIR/train-seed$seed --workdir $WORKDIR")
done
side_by_side "${TRAIN[@]}"

MODELS=()
for seed in 0 1 2; do for mode in plain cuset; do MODELS+=("$WORKDIR/train-seed$seed/$mode/final"); done; done
# the primary figure: token-level NLL on the held-out seed tasks, sensitive vs other tokens, per version
[ -e "$WORKDIR/heldout_nll.json" ] || PYTHONPATH=".:${PYTHONPATH:-}" ${PYTHON:-.venv/bin/python} bench/heldout_token_nll.py \
    --data "$WORKDIR/curated-test" "${MODELS[@]}" --json "$WORKDIR/heldout_nll.json"

GENERATE=()
CHECK=()
for seed in 0 1 2; do
    for mode in plain cuset; do
        model="$WORKDIR/train-seed$seed/$mode/final"
        out="$WORKDIR/evaluate-seed$seed-$mode"
        [ -e "$out/.done" ] && continue
        [ -e "$out/generations/generation.json" ] || GENERATE+=("$KW evaluate --model $model --generate-only \
            --samples $SAMPLES --temperature 0.8 --max-new-tokens $MAX_NEW_TOKENS --batch-size $EVAL_BATCH \
            --seed $seed --out $out --workdir $WORKDIR")
        CHECK+=("$KW evaluate --model $model --generations $out/generations --samples $SAMPLES --seed $seed \
            --out $out --workdir $WORKDIR && touch $out/.done")
    done
done
side_by_side "${GENERATE[@]}"
side_by_side "${CHECK[@]}"
# the table (means and spread across seeds), under one `cuset-ablation` parent run with the others as children
PYTHONPATH=".:${PYTHONPATH:-}" ${PYTHON:-.venv/bin/python} bench/cuset_ablation.py "$WORKDIR" \
    --json "$WORKDIR/cuset_ablation.json" --png "$WORKDIR/cuset_ablation.png" --markdown "$WORKDIR/cuset_ablation.md" \
    --tracking-uri "sqlite:///$(cd "$WORKDIR" && pwd)/mlflow.db"
echo "ablation done: MLflow store $WORKDIR/mlflow.db (kernelwright mlflow-server --workdir $WORKDIR)"
