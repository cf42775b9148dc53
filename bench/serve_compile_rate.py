"""How many of a running kernel server's answers to held-out problems compile.

    python bench/serve_compile_rate.py --url http://127.0.0.1:8000 --problems W/synthesize/heldout \
        --count 20 --json OUT.json [--concurrency 8]

Waits (up to `--ready-timeout-s`) until the server answers `/readyz`, then sends `--count` held-out
problems (a fixed sample of the `.py` problem files under `--problems`, seed 0), `--concurrency` at a
time (default one; more lets the server batch them, as clients would), to `POST /v1/kernels/generate`
with the server's own defaults (one candidate, its generation budget, its compile check and repair),
and counts the answers whose first candidate compiles (`candidates[0].compile.ok`: NVRTC for the
device code and the host check). The figure is the compile pass rate of what a client gets back; a
request that fails (HTTP error, no candidate) counts as not compiling and is listed. No baseline:
this is a quality figure, not a speed target. While it runs, `<json stem>.partial.json` holds the answers
so far (rewritten after each, `complete` false), so a run cut short still leaves its counts; the final
`--json` replaces it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelwright import atomic


def sample_problems(folder: Path, count: int, seed: int = 0) -> list[Path]:
    problems = sorted(p for p in folder.rglob("*.py") if p.is_file())
    if not problems:
        raise SystemExit(f"no problem files (*.py) under {folder}")
    return sorted(random.Random(seed).sample(problems, min(count, len(problems))))


def post(url: str, body: dict[str, Any], timeout_s: float) -> tuple[int, dict[str, Any] | str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:300]
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        return 0, f"{type(exc).__name__}: {exc}"[:300]


def wait_ready(url: str, timeout_s: float) -> bool:
    """Whether the server answered `GET /readyz` with 200 (its model loaded) within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/readyz", timeout=2):
                return True
        except OSError:  # refused, or a 503 while the model loads
            time.sleep(1)
    return False


def ask(url: str, problem: Path, timeout_s: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    status, answer = post(url.rstrip("/") + "/v1/kernels/generate", {"reference_code": problem.read_text()},
                          timeout_s)
    row: dict[str, Any] = {"problem": problem.name, "status": status, "latency_s": time.perf_counter() - t0}
    if status != 200 or not isinstance(answer, dict) or not answer.get("candidates"):
        row.update(compiles=False, error=answer if isinstance(answer, str) else "no candidate")
        return row
    first = answer["candidates"][0]
    compiled = first.get("compile") or {}
    row.update(compiles=bool(compiled.get("ok")), repairs=first.get("repairs", 0),
               device=(compiled.get("device") or {}).get("status"), host=(compiled.get("host") or {}).get("status"),
               completion_tokens=answer.get("usage", {}).get("completion_tokens"), model=answer.get("model"))
    return row


def latency(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Seconds an answer took (median, slowest), and the answers' generated tokens over their summed seconds."""
    seconds = sorted(r["latency_s"] for r in rows)
    tokens = sum(r.get("completion_tokens") or 0 for r in rows)
    return {"median_s": round(statistics.median(seconds), 2) if seconds else None,
            "max_s": round(seconds[-1], 2) if seconds else None,
            "tokens_per_answer_s": round(tokens / sum(seconds), 1) if seconds and sum(seconds) > 0 else None}


def figures(rows: list[dict[str, Any]], concurrency: int, command: str, complete: bool) -> dict[str, Any]:
    compiled = sum(r["compiles"] for r in rows)
    return {"what": "compile pass rate of POST /v1/kernels/generate on held-out problems, server defaults",
            "command": command, "complete": complete, "problems": len(rows), "concurrency": concurrency,
            "compiled": compiled, "compile_rate": compiled / len(rows) if rows else 0.0,
            "failed_requests": sum(r["status"] != 200 for r in rows),
            # what the server's repair (its --repair: resample or feedback) turned around
            "repaired": sum(r.get("repairs", 0) > 0 for r in rows),
            "compiled_after_repair": sum(r["compiles"] and r.get("repairs", 0) > 0 for r in rows),
            "latency": latency(rows), "rows": rows}


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically (a reader sees the last whole file, never half of one), in this bench's layout."""
    atomic.write_text(path, json.dumps(data, indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="the server's base URL")
    ap.add_argument("--problems", type=Path, required=True, help="folder of held-out KernelBench problem files")
    ap.add_argument("--count", type=int, default=20, help="problems to send")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per request, in seconds")
    ap.add_argument("--ready-timeout-s", type=float, default=300.0,
                    help="how long to wait for the server's model to load, in seconds")
    ap.add_argument("--concurrency", type=int, default=1, help="requests in flight at once")
    ap.add_argument("--json", type=Path, required=True, help="where the figures go")
    args = ap.parse_args(argv)
    if args.concurrency < 1:
        ap.error(f"--concurrency must be 1 or more, not {args.concurrency}")
    if not wait_ready(args.url, args.ready_timeout_s):
        raise SystemExit(f"{args.url} was not ready (GET /readyz) within {args.ready_timeout_s:g} s")
    problems = sample_problems(args.problems, args.count)
    command = "python bench/serve_compile_rate.py " + " ".join(argv if argv is not None else sys.argv[1:])
    partial = args.json.with_name(args.json.stem + ".partial.json")
    finished: list[dict[str, Any]] = []  # in the order they finish
    lock = threading.Lock()

    def one(problem: Path) -> dict[str, Any]:
        row = ask(args.url, problem, args.timeout_s)
        with lock:
            finished.append(row)
            write_json(partial, figures(finished, args.concurrency, command, complete=False))
            sys.stderr.write(f"[{len(finished)}/{len(problems)}] {problem.name}: compiles={row['compiles']}\n")
        return row

    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        rows = list(pool.map(one, problems))  # in the sample's order, whatever order they finish in
    out = figures(rows, args.concurrency, command, complete=True)
    write_json(args.json, out)
    partial.unlink(missing_ok=True)
    sys.stdout.write(f"compile pass rate {out['compiled']}/{len(rows)} = {out['compile_rate']:.2f}; answers took "
                     f"{out['latency']['median_s']} s (median), {out['latency']['max_s']} s at most\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
