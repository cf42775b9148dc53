# Sourced by the GPU recipe scripts: side_by_side FN ARG... runs FN ARG for each ARG in the background,
# at most PARALLEL at a time, and returns when all of them have ended; under `set -e` the first failure
# stops the calling script. Only its own jobs count: a job the caller runs beside it neither takes one
# of the PARALLEL places nor is waited for. With GPUS set (GPU ids, e.g. "0 1 2 3"), the job in place k
# sees only GPU k modulo their count (CUDA_VISIBLE_DEVICES): PARALLEL = 2 x the GPUs puts two on each.
side_by_side() {
    local fn="$1" arg pid k
    local -a mine=() places=()
    shift
    for arg in "$@"; do
        while ! k=$(_free_place ${places[@]+"${places[@]}"}); do wait -n; done
        { on_gpu "$k"; "$fn" "$arg"; } &
        places[k]=$!
        mine+=("$!")
    done
    for pid in ${mine[@]+"${mine[@]}"}; do wait_for "$pid"; done
}

# on_gpu K: this (sub)shell and what it starts see only the K-th of GPUS (modulo their count); no GPUS: all
on_gpu() {
    local -a gpus
    read -r -a gpus <<< "${GPUS:-}"
    [ "${#gpus[@]}" -eq 0 ] || export CUDA_VISIBLE_DEVICES="${gpus[$(( $1 % ${#gpus[@]} ))]}"
}

# wait_for PID: the job's exit status. 127 means a `wait -n` already reported the job (a failure there stopped
# the script under `set -e`), so it counts as done.
wait_for() {
    local rc
    wait "$1" || { rc=$?; [ "$rc" = 127 ] || return "$rc"; }
}

_free_place() {  # the PID of each place's last job... -> the first place free (its job ended, or a new place
    local running k=0 pid  # below PARALLEL); fails when every place is taken
    running=" $(jobs -rp | tr '\n' ' ') "
    for pid in "$@"; do
        [[ "$running" == *" $pid "* ]] || { echo "$k"; return 0; }
        k=$((k + 1))
    done
    [ "$k" -lt "$PARALLEL" ] || return 1
    echo "$k"
}
