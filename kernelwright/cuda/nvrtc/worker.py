"""The NVRTC worker process of `pool.NvrtcPool`: one JSON request per line in, one reply out.

    python -m kernelwright.cuda.nvrtc.worker      # started by the pool, never by hand

Request: {"source", "name", "options": [str], "cpu_s": float}. Reply: {"status": "ok" | "failed" |
"unavailable", "log", "seconds", "ptx_bytes"} and "limit": "memory_limit" when NVRTC ran out of
memory. Before each compile the worker lowers its own soft `RLIMIT_CPU` to the CPU time used so
far plus `cpu_s` (0: no limit), so a runaway compile is killed by SIGXCPU (the parent then starts a
new worker); its memory limit is set by the parent when it starts the process.
"""

from __future__ import annotations

import json
import math
import resource
import sys
from typing import Any

from kernelwright.cuda.nvrtc.program import load_nvrtc, run_nvrtc


def _cpu_budget(cpu_s: float) -> None:
    if cpu_s <= 0:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + cpu_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _load() -> Any:
    try:
        return load_nvrtc()
    except Exception as exc:  # noqa: BLE001 - any failure to load: unavailable
        return f"{type(exc).__name__}: {exc}"


def compile_one(nvrtc: Any, request: dict[str, Any]) -> dict[str, Any]:
    done = run_nvrtc(nvrtc, request["source"], request["name"], [o.encode() for o in request["options"]])
    reply: dict[str, Any] = {"status": "ok" if done.ok else "failed", "log": done.log, "seconds": done.seconds,
                             "ptx_bytes": done.ptx_bytes}
    if done.err == nvrtc.nvrtcResult.NVRTC_ERROR_OUT_OF_MEMORY:
        reply["limit"] = "memory_limit"
    return reply


def main() -> None:
    nvrtc = _load()
    for line in sys.stdin:
        request = json.loads(line)
        if isinstance(nvrtc, str):
            reply: dict[str, Any] = {"status": "unavailable", "log": f"NVRTC could not be loaded: {nvrtc}",
                                     "seconds": 0.0}
        else:
            _cpu_budget(float(request.get("cpu_s", 0)))
            try:
                reply = compile_one(nvrtc, request)
            except MemoryError:
                reply = {"status": "failed", "log": "", "seconds": 0.0, "limit": "memory_limit"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
