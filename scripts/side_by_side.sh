# Sourced by the GPU recipe scripts: side_by_side FN ARG... runs FN ARG for each ARG in the background,
# at most PARALLEL at a time, and returns when all of them have ended; under `set -e` the first failure
# stops the calling script. Only its own jobs count: a job the caller runs beside it neither takes one
# of the PARALLEL places nor is waited for.
side_by_side() {
    local fn="$1" arg pid
    local -a mine=()
    shift
    for arg in "$@"; do
        while [ "$(_running_of ${mine[@]+"${mine[@]}"})" -ge "$PARALLEL" ]; do wait -n; done
        "$fn" "$arg" &
        mine+=("$!")
    done
    for pid in ${mine[@]+"${mine[@]}"}; do wait_for "$pid"; done
}

# wait_for PID: the job's exit status. 127 means a `wait -n` already reported the job (a failure there stopped
# the script under `set -e`), so it counts as done.
wait_for() {
    local rc
    wait "$1" || { rc=$?; [ "$rc" = 127 ] || return "$rc"; }
}

_running_of() {  # PID... -> how many of them are jobs of this shell still running
    local running n=0 pid
    running=" $(jobs -rp | tr '\n' ' ') "
    for pid in "$@"; do [[ "$running" == *" $pid "* ]] && n=$((n + 1)); done
    echo "$n"
}
