"""kernelwright's own Prometheus series, next to the request counts and latencies of Litestar's plugin.

The collectors live in the process-wide default registry (once per process, whatever the number
of apps built in it) and `/metrics` answers them all.
"""

from __future__ import annotations

import threading

from prometheus_client import Counter, Gauge

from kernelwright.serving.schemas import CompileInfo

QUEUE_DEPTH = Gauge("kernelwright_queue_depth", "Requests in flight on /v1 routes (generating or waiting)")
TOKENS = Counter("kernelwright_tokens_generated_total", "Completion tokens generated")
PROMPT_TOKENS = Counter("kernelwright_prompt_tokens_total", "Prompt tokens read")
COMPILES = Counter("kernelwright_compile_checks_total", "Compile checks of generated candidates, by outcome",
                   ["result"])
REPAIRS = Counter("kernelwright_repairs_total", "Candidates regenerated with their compiler log")
RELOADS = Counter("kernelwright_model_reloads_total", "Polls of the registry alias that swapped in a new "
                  "version (swapped) or failed to (failed)", ["result"])
CANCELLED = Counter("kernelwright_requests_cancelled_total", "Requests cancelled because their client went away")
ENGINE_SEQUENCES = Gauge("kernelwright_engine_sequences", "Sequences (candidates) in the continuous-batching "
                         "engine: prefilling, decoding or waiting for cache room")
REJECTED = Counter("kernelwright_queue_rejections_total", "Requests answered 503 because the queue was full")

_lock = threading.Lock()
_tally = {"ok": 0, "checked": 0}


def _pass_rate() -> float:
    with _lock:
        return _tally["ok"] / _tally["checked"] if _tally["checked"] else 0.0


PASS_RATE = Gauge("kernelwright_compile_pass_rate", "Share of compile-checked candidates that compiled "
                  "(since start; 0 before the first check)")
PASS_RATE.set_function(_pass_rate)


def outcome(info: CompileInfo) -> str:
    if info.ok:
        return "ok"
    statuses = {info.device.status, info.host.status}
    return "failed" if "failed" in statuses else "unavailable"


def record_compiles(infos: list[CompileInfo]) -> None:
    for info in infos:
        result = outcome(info)
        COMPILES.labels(result).inc()
        if result != "unavailable":
            with _lock:
                _tally["checked"] += 1
                _tally["ok"] += result == "ok"


def record_tokens(prompt: int, completion: int) -> None:
    PROMPT_TOKENS.inc(prompt)
    TOKENS.inc(completion)
