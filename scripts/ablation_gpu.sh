#!/usr/bin/env bash
# Plain vs CuSeT on a pretrained `small` base, 3 seeds each, on one CUDA host, as one command sequence.
#
#     bash scripts/ablation_gpu.sh [WORKDIR]          # default WORKDIR: ./.kernelwright-ablation
#
# 1. pretrains the `small` base (~90M parameters, 25 min budget) on the installed packages' code;
# 2. curates the seed train split with it (p_t, regions, masks, sample weights) and the test split
#    (for the held-out token NLL);
# 3. `kernelwright train --ablation plain,cuset` for seeds 0, 1, 2: child runs train[plain],
#    train[cuset] under one train-ablation parent run per seed, each version registered;
# 4. the token-level NLL of every trained version on the held-out seed tasks, CUDA-sensitive vs other
#    tokens (bench/heldout_token_nll.py -> WORKDIR/heldout_nll.json);
# 5. evaluates every trained version on the held-out seed tasks with 4 samples each.
# Every step is an MLflow run in WORKDIR/mlflow.db; nothing here needs a network. Models stay on
# the host: run everything there, then bring back WORKDIR/mlflow.db and WORKDIR/evaluate-*/.
# Env: STEPS (training steps, default 300), SAMPLES (per held-out task, default 4), PYTHON.
set -euo pipefail

WORKDIR="${1:-.kernelwright-ablation}"
STEPS="${STEPS:-300}"
SAMPLES="${SAMPLES:-4}"
KW="${PYTHON:-.venv/bin/python} -m kernelwright.cli"
BASE="$WORKDIR/base-small"
export KERNELWRIGHT_WORKDIR="$WORKDIR"

python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: this script is for a GPU host')"

$KW base-model pretrain --size small --out "$BASE" --workdir "$WORKDIR"
$KW curate --base-model "$BASE" --split train --out "$WORKDIR/curated-train" --workdir "$WORKDIR"
$KW curate --base-model "$BASE" --split test --out "$WORKDIR/curated-test" --workdir "$WORKDIR"

for seed in 0 1 2; do
    $KW train --ablation plain,cuset --seed "$seed" --base-model "$BASE" --data "$WORKDIR/curated-train" \
        --max-steps "$STEPS" --output-dir "$WORKDIR/train-seed$seed" --workdir "$WORKDIR"
done

MODELS=()
for seed in 0 1 2; do for mode in plain cuset; do MODELS+=("$WORKDIR/train-seed$seed/$mode/final"); done; done
# the primary figure: token-level NLL on the held-out seed tasks, sensitive vs other tokens, per version
PYTHONPATH=. ${PYTHON:-.venv/bin/python} bench/heldout_token_nll.py --data "$WORKDIR/curated-test" "${MODELS[@]}" \
    --json "$WORKDIR/heldout_nll.json"

for seed in 0 1 2; do
    for mode in plain cuset; do
        model="$WORKDIR/train-seed$seed/$mode/final"
        $KW evaluate --model "$model" --samples "$SAMPLES" --temperature 0.8 --seed "$seed" \
            --out "$WORKDIR/evaluate-seed$seed-$mode" --workdir "$WORKDIR"
    done
done
echo "ablation done: MLflow store $WORKDIR/mlflow.db (kernelwright mlflow-server --workdir $WORKDIR)"
