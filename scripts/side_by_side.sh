# Sourced by the GPU recipe scripts: side_by_side FN ARG... runs FN ARG for each ARG in the background,
# at most PARALLEL at a time, and returns when all have ended; under `set -e` the first failure stops
# the calling script.
side_by_side() {
    local fn="$1" arg
    shift
    for arg in "$@"; do
        while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
        "$fn" "$arg" &
    done
    while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; done
}
