"""Serving throughput on the CPU: `kernelwright serve` against `mlflow models serve` and `transformers serve`.

    .venv/bin/python bench/serve_throughput.py --json bench/results/serve_throughput_cpu.json \
        [--concurrency 1,8,32] [--requests N] [--max-new-tokens 16]

In one run: the tiny model (`build_tiny_model`: random weights, a tokenizer trained on the seed
corpus) is registered in a temporary local MLflow store as models:/kernelwright-coder@champion,
then three servers of that registered version start one after the other, each on a free
loopback port, and are stopped before the next starts (and on any error):

- `kernelwright serve --model models:/kernelwright-coder@champion`, driven through
  POST /v1/kernels/generate with `compile_check: true`, then the same requests with
  `compile_check: false` (one process: the check is a per-request field);
- `mlflow models serve -m models:/kernelwright-coder@champion --env-manager local`, POST /invocations
  with the rendered chat prompt;
- `transformers serve --continuous-batching` of the registered version's files (its `model/` weights
  with its tokenizer), POST /v1/chat/completions with the same messages.

Every server gets the same requests: the seed references in rotation (request i: reference
i mod 72, as the kernel prompt of `kernelwright.prompting`), greedy, `--max-new-tokens` new tokens,
`repair_attempts: 0` (the compile check alone, no regeneration). At each concurrency c, c clients
send requests back to back (closed loop) until the level's requests are done; requests/s is the
answered requests over the level's wall time, latency is per request from send to the whole answer.
Before the timed levels each server answers `--warmup` untimed requests. The servers' torch gets
`--torch-threads` threads (OMP_NUM_THREADS): the clients share the same cores.

The tiny random model never writes a CUDA source, so with the check on each answer ends at the
source search ("no_cuda_source"; `--no_compile_host`, so no precompiled header is built): the
figure is the check's fixed cost per request, not a compile (bench/compile_check.py times those).

Printed: requests/s, p50 and p99 per server and concurrency, and the ratios kernelwright/mlflow and
kernelwright/transformers-serve with the check on and off. Written (`--json`): every raw figure,
the command, the machine (CPU count, load average before and after each server), the versions and
each server's command line and start-up time; a server that cannot run here is recorded with why.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL_NAME = "kernelwright-coder"
ALIAS = "champion"
KW_ON, KW_OFF, MLFLOW, TF_SERVE = "kernelwright_compile_on", "kernelwright_compile_off", "mlflow", "transformers_serve"
SERVERS = (KW_ON, KW_OFF, MLFLOW, TF_SERVE)
RATIOS = ((KW_ON, MLFLOW), (KW_OFF, MLFLOW), (KW_ON, TF_SERVE), (KW_OFF, TF_SERVE))
SHORT = {KW_ON: "kw(on)", KW_OFF: "kw(off)", MLFLOW: "mlflow", TF_SERVE: "tf-serve"}

Body = tuple[str, dict[str, Any]]


# ---- pure functions (tests/test_bench_serve.py) -----------------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0 and 100, not {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(latencies: Sequence[float], wall_s: float, errors: int = 0) -> dict[str, Any]:
    """Requests/s (answered requests over the wall time) and latency percentiles of one level."""
    ok = len(latencies)
    stats: dict[str, Any] = {"requests": ok + errors, "ok": ok, "errors": errors, "wall_s": round(wall_s, 4),
                             "rps": round(ok / wall_s, 4) if wall_s > 0 and ok else None}
    for name, q in (("p50_s", 50), ("p90_s", 90), ("p99_s", 99)):
        stats[name] = round(percentile(latencies, q), 4) if ok else None
    stats["mean_s"] = round(sum(latencies) / ok, 4) if ok else None
    return stats


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator rounded to 2 places; None when either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 2)


def ratio_rows(levels: dict[str, dict[int, dict[str, Any]]], concurrencies: Sequence[int]) -> list[dict[str, Any]]:
    """One row per concurrency: each server's requests/s and the kernelwright/baseline ratios.

    `levels[server][concurrency]` is a `summarize` dict; a missing server or level gives None."""
    rows = []
    for c in concurrencies:
        rps = {name: levels.get(name, {}).get(c, {}).get("rps") for name in SERVERS}
        row: dict[str, Any] = {"concurrency": c, **{f"{name}_rps": rps[name] for name in SERVERS}}
        for num, den in RATIOS:
            row[f"{num}/{den}"] = ratio(rps[num], rps[den])
        rows.append(row)
    return rows


def _cell(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def format_table(rows: Sequence[dict[str, Any]], levels: dict[str, dict[int, dict[str, Any]]]) -> str:
    """The printed table: per concurrency, each server's req/s (p50/p99 s), then the ratios."""
    head = ["c", *(f"{SHORT[s]} req/s (p50/p99 s)" for s in SERVERS),
            *(f"{SHORT[n]}/{SHORT[d]}" for n, d in RATIOS)]
    lines = [head]
    for row in rows:
        c = row["concurrency"]
        cells = [str(c)]
        for name in SERVERS:
            stats = levels.get(name, {}).get(c)
            if not stats or stats.get("rps") is None:
                cells.append("-")
                continue
            cells.append(f"{stats['rps']:.2f} ({stats['p50_s']:.2f}/{stats['p99_s']:.2f})")
        cells += [_cell(row[f"{n}/{d}"], suffix="x") for n, d in RATIOS]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in lines)


def requests_for(concurrency: int, requests: int | None) -> int:
    """Requests at one level: --requests when given, else 32 or two rounds of the clients if more."""
    return requests if requests else max(32, 2 * concurrency)


def parse_concurrency(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"concurrency must be positive integers separated by commas, not {text!r}")
    return values


# ---- processes ------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerFailed(RuntimeError):
    pass


@dataclass
class Server:
    """A server process in its own process group, stopped (group and all) when the block ends."""

    name: str
    argv: list[str]
    env: dict[str, str]
    ready_url: str
    log_path: Path
    start_timeout_s: float
    proc: subprocess.Popen[bytes] | None = None
    startup_s: float | None = None

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def start(self) -> None:
        import httpx

        log = self.log_path.open("wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, process_group=0)
        log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerFailed(f"{self.name} exited with status {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.ready_url, timeout=2).status_code == 200:
                    self.startup_s = round(time.perf_counter() - t0, 2)
                    return
            time.sleep(0.25)
        raise ServerFailed(f"{self.name} was not ready at {self.ready_url} in {self.start_timeout_s:.0f} s: "
                           f"{self.log_tail()}")

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # the process group this script started
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    @contextlib.contextmanager
    def running(self) -> Iterator[Server]:
        try:
            self.start()
            yield self
        finally:
            self.stop()


# ---- load --------------------------------------------------------------------------------------------

@dataclass
class LevelResult:
    latencies: list[float] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0


async def _drive(base: str, bodies: Sequence[Body], concurrency: int, timeout_s: float) -> LevelResult:
    import httpx

    result = LevelResult()
    work = iter(enumerate(bodies))
    answers: dict[int, dict[str, Any]] = {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s, limits=limits) as client:

        async def worker() -> None:
            for i, (path, body) in work:
                t0 = time.perf_counter()
                try:
                    r = await client.post(path, json=body)
                except httpx.HTTPError as exc:
                    result.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                    continue
                elapsed = time.perf_counter() - t0
                if r.status_code != 200:
                    result.errors.append(f"{r.status_code}: {r.text[:300]}")
                    continue
                result.latencies.append(elapsed)
                answers[i] = r.json()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.wall_s = time.perf_counter() - start
    result.answers = [answers[i] for i in sorted(answers)]
    return result


def drive(base: str, bodies: Sequence[Body], concurrency: int, timeout_s: float) -> LevelResult:
    return asyncio.run(_drive(base, bodies, concurrency, timeout_s))


# ---- the model and the requests -------------------------------------------------------------------

@dataclass
class Registered:
    uri: str
    version: str
    checkpoint: Path  # the registered version's weights and tokenizer in one folder (for transformers serve)
    tokenizer: Any
    parameters: int
    build_s: float


def register_tiny_model(workdir: Path, max_new_tokens: int) -> Registered:
    """Build the tiny model, log and register it in `workdir`'s MLflow store, alias @champion."""
    import mlflow
    from mlflow.models import infer_signature
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelwright.models import build_tiny_model
    from kernelwright.seed import load_seed_tasks
    from kernelwright.tracking import set_alias, setup_tracking

    t0 = time.perf_counter()
    built = build_tiny_model(workdir / "tiny", [t.reference + "\n" + t.solution for t in load_seed_tasks()])
    setup_tracking(workdir)
    model = AutoModelForCausalLM.from_pretrained(built)
    tokenizer = AutoTokenizer.from_pretrained(built)
    # params in the signature, so /invocations takes the token budget per request
    signature = infer_signature("prompt", "completion", params={
        "max_new_tokens": max_new_tokens, "do_sample": False, "return_full_text": False})
    with mlflow.start_run(run_name="serve-throughput-bench"):
        info = mlflow.transformers.log_model(  # type: ignore[attr-defined]
            transformers_model={"model": model, "tokenizer": tokenizer}, name="model", task="text-generation",
            registered_model_name=MODEL_NAME, signature=signature,
            pip_requirements=["kernelwright", "torch", "transformers"])
    version = str(info.registered_model_version)
    set_alias(version, ALIAS, MODEL_NAME)
    files = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{MODEL_NAME}/{version}",
                                                     dst_path=str(workdir / "registered")))
    checkpoint = workdir / "registered-checkpoint"
    shutil.copytree(files / "model", checkpoint)
    for item in (files / "components" / "tokenizer").iterdir():
        shutil.copy2(item, checkpoint / item.name)
    return Registered(f"models:/{MODEL_NAME}@{ALIAS}", version, checkpoint, tokenizer,
                      sum(p.numel() for p in model.parameters()), round(time.perf_counter() - t0, 2))


def prompts(count: int) -> list[tuple[str, list[dict[str, str]]]]:
    """(reference, kernel prompt messages) for requests 0..count-1: the seed references in rotation."""
    from kernelwright.prompting import prompt_messages
    from kernelwright.seed import load_seed_tasks

    refs = [t.reference for t in load_seed_tasks()]
    return [(refs[i % len(refs)], prompt_messages(refs[i % len(refs)])) for i in range(count)]


def kernel_bodies(items: Sequence[tuple[str, list[dict[str, str]]]], max_new: int, check: bool) -> list[Body]:
    return [("/v1/kernels/generate", {"reference_code": ref, "max_new_tokens": max_new, "temperature": 0,
                                      "compile_check": check, "repair_attempts": 0}) for ref, _ in items]


def mlflow_bodies(items: Sequence[tuple[str, list[dict[str, str]]]], max_new: int, tokenizer: Any) -> list[Body]:
    texts = [str(tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)) for _, m in items]
    return [("/invocations", {"inputs": [t], "params": {"max_new_tokens": max_new, "do_sample": False,
                                                         "return_full_text": False}}) for t in texts]


def chat_bodies(items: Sequence[tuple[str, list[dict[str, str]]]], max_new: int, model: str) -> list[Body]:
    return [("/v1/chat/completions", {"model": model, "messages": m, "max_tokens": max_new, "temperature": 0})
            for _, m in items]


def answer_figures(name: str, answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Tokens per answer as each server reports them, and kernelwright's own generate and compile times."""
    out: dict[str, Any] = {}
    if name in (KW_ON, KW_OFF, TF_SERVE):
        tokens = [a.get("usage", {}).get("completion_tokens") for a in answers]
        prompt = [a.get("usage", {}).get("prompt_tokens") for a in answers]
        out["completion_tokens_mean"] = _mean(tokens)
        out["prompt_tokens_mean"] = _mean(prompt)
    if name == MLFLOW:
        # /invocations reports no token counts, and its text comes back stripped (the random model's greedy
        # tokens are mostly whitespace): the same greedy model on the same prompts is counted by the others
        out["prediction_chars_mean"] = _mean([len(p) for a in answers for p in a.get("predictions", [])])
    if name in (KW_ON, KW_OFF):
        compile_s = [a.get("timings", {}).get("compile_s") for a in answers]
        generate_s = [a.get("timings", {}).get("generate_s") for a in answers]
        out["server_compile_s_p50"] = _p50(compile_s)
        out["server_generate_s_p50"] = _p50(generate_s)
        statuses = sorted({c["compile"]["device"]["status"] for a in answers for c in a.get("candidates", [])
                           if c.get("compile")})
        out["compile_device_statuses"] = statuses
    return out


def _mean(values: Sequence[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, int | float)]
    return round(sum(nums) / len(nums), 2) if nums else None


def _p50(values: Sequence[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, int | float)]
    return round(percentile(nums, 50), 4) if nums else None


# ---- the run ---------------------------------------------------------------------------------------

def _loadavg() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for pkg in ("torch", "transformers", "mlflow", "litestar", "uvicorn", "fastapi", "httpx"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def _git() -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
        return done.stdout.strip()

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return {"commit": git("rev-parse", "HEAD"),
                "uncommitted_in_kernelwright_serving": bool(git("status", "--porcelain", "kernelwright/serving"))}
    return {}


def transformers_serve_unavailable(env: dict[str, str]) -> str | None:
    """Why `transformers serve --continuous-batching` cannot run here (None: it can)."""
    try:
        done = subprocess.run([_bin("transformers"), "serve", "--help"], env=env, capture_output=True, text=True,
                              timeout=180)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`transformers serve --help` failed: {type(exc).__name__}: {exc}"
    text = done.stdout + done.stderr
    if done.returncode != 0:
        return f"`transformers serve --help` exited {done.returncode}: {text[-800:]}"
    if "--continuous-batching" not in text:
        return "the installed transformers' `serve` has no --continuous-batching option"
    return None


@dataclass
class Plan:
    concurrency: list[int]
    requests: int | None
    max_new_tokens: int
    warmup: int
    timeout_s: float


def run_levels(base: str, names: Sequence[str], make: Callable[[str, list[tuple[str, list[dict[str, str]]]]],
               list[Body]], plan: Plan) -> dict[str, Any]:
    """Warm up, then every concurrency level for each of `names` (request builders by name)."""
    report: dict[str, Any] = {name: {"levels": {}} for name in names}
    for name in names:
        warm = drive(base, make(name, prompts(plan.warmup)), min(plan.warmup, 4), plan.timeout_s)
        report[name]["warmup"] = {"requests": plan.warmup, "wall_s": round(warm.wall_s, 3),
                                  "errors": warm.errors[:3]}
    for c in plan.concurrency:
        items = prompts(requests_for(c, plan.requests))
        for name in names:
            load_before = _loadavg()
            res = drive(base, make(name, items), c, plan.timeout_s)
            stats = summarize(res.latencies, res.wall_s, len(res.errors))
            stats.update(answer_figures(name, res.answers))
            stats["first_errors"] = res.errors[:3]
            stats["loadavg_before"], stats["loadavg_after"] = load_before, _loadavg()
            report[name]["levels"][str(c)] = stats
            print(f"{name:26s} c={c:<3d} n={stats['requests']:<3d} req/s={_cell(stats['rps'], 3)} "
                  f"p50={_cell(stats['p50_s'], 3)}s p99={_cell(stats['p99_s'], 3)}s errors={stats['errors']} "
                  f"load={stats['loadavg_after'][0]}", flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--concurrency", type=parse_concurrency, default=[1, 8, 32],
                        help="comma-separated client counts (default 1,8,32)")
    parser.add_argument("--requests", type=int, default=None,
                        help="requests per level and server (default: max(32, 2 x concurrency))")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=4, help="untimed requests per server before the levels")
    parser.add_argument("--torch-threads", type=int, default=1, help="OMP_NUM_THREADS of the servers")
    parser.add_argument("--cb-num-blocks", type=int, default=128, help="transformers serve --cb-num-blocks")
    parser.add_argument("--cb-max-batch-tokens", type=int, default=512,
                        help="transformers serve --cb-max-batch-tokens")
    parser.add_argument("--mlflow-workers", type=int, default=1, help="mlflow models serve -w (its default: 1)")
    parser.add_argument("--servers", default=",".join(("kernelwright", "mlflow", "transformers_serve")),
                        help="which servers to run (comma-separated: kernelwright, mlflow, transformers_serve)")
    parser.add_argument("--start-timeout", type=float, default=240.0, help="seconds a server may take to be ready")
    parser.add_argument("--request-timeout", type=float, default=300.0)
    args = parser.parse_args()
    plan = Plan(args.concurrency, args.requests, args.max_new_tokens, args.warmup, args.request_timeout)
    wanted = {s.strip() for s in args.servers.split(",") if s.strip()}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers' `finally` stops them

    t_run = time.perf_counter()
    report: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "sched_affinity_cpus": len(os.sched_getaffinity(0)),
                    "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_start": _loadavg()},
        "versions": _versions(), "git": _git(),
        "settings": {"concurrency": plan.concurrency, "requests_per_level": {
            str(c): requests_for(c, plan.requests) for c in plan.concurrency}, "max_new_tokens": plan.max_new_tokens,
            "temperature": 0, "repair_attempts": 0, "warmup_requests": plan.warmup,
            "torch_threads_per_server": args.torch_threads, "kernelwright_compile_host": False,
            "kernelwright_max_queue": 0, "mlflow_workers": args.mlflow_workers,
            "transformers_cb_num_blocks": args.cb_num_blocks,
            "transformers_cb_max_batch_tokens": args.cb_max_batch_tokens,
            "prompts": "seed references in rotation (kernelwright.prompting.prompt_messages)"},
        "servers": {},
    }
    servers: dict[str, Any] = report["servers"]
    with tempfile.TemporaryDirectory(prefix="kw_bench_serve_") as tmp_name:
        tmp = Path(tmp_name)
        workdir = tmp / "work"
        workdir.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "KERNELWRIGHT_API_KEYS"}
        env.update({"MLFLOW_TRACKING_URI": f"sqlite:///{workdir / 'mlflow.db'}", "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": str(args.torch_threads),
                    "MKL_NUM_THREADS": str(args.torch_threads), "TOKENIZERS_PARALLELISM": "false",
                    "PYTHONUNBUFFERED": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
        os.environ.update({k: env[k] for k in ("MLFLOW_TRACKING_URI", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")})
        print("building and registering the tiny model ...", flush=True)
        reg = register_tiny_model(workdir, plan.max_new_tokens)
        report["model"] = {"uri": reg.uri, "version": reg.version, "parameters": reg.parameters,
                           "build_and_register_s": reg.build_s, "spec": "kernelwright.models.TinyModelSpec()"}
        print(f"registered {reg.uri} (version {reg.version}, {reg.parameters:,} parameters) in {reg.build_s} s",
              flush=True)

        def kw_make(name: str, items: list[tuple[str, list[dict[str, str]]]]) -> list[Body]:
            return kernel_bodies(items, plan.max_new_tokens, name == KW_ON)

        def mlflow_make(name: str, items: list[tuple[str, list[dict[str, str]]]]) -> list[Body]:
            return mlflow_bodies(items, plan.max_new_tokens, reg.tokenizer)

        def tf_make(name: str, items: list[tuple[str, list[dict[str, str]]]]) -> list[Body]:
            return chat_bodies(items, plan.max_new_tokens, str(reg.checkpoint))

        runs: list[tuple[str, list[str], Callable[[int], list[str]], str, Any]] = [
            ("kernelwright", [KW_ON, KW_OFF], lambda port: [
                sys.executable, "-m", "kernelwright.cli", "serve", "--model", reg.uri, "--port", str(port),
                "--workdir", str(workdir), "--max_queue", "0", "--no_compile_host",
                "--compile_cache_dir", str(tmp / "compile-cache"), "--log_level", "warning"], "/readyz", kw_make),
            ("mlflow", [MLFLOW], lambda port: [
                _bin("mlflow"), "models", "serve", "-m", reg.uri, "--env-manager", "local", "-h", "127.0.0.1",
                "-p", str(port), "-w", str(args.mlflow_workers)], "/ping", mlflow_make),
            ("transformers_serve", [TF_SERVE], lambda port: [
                _bin("transformers"), "serve", str(reg.checkpoint), "--continuous-batching", "--device", "cpu",
                "--host", "127.0.0.1", "--port", str(port), "--cb-num-blocks", str(args.cb_num_blocks),
                "--cb-max-batch-tokens", str(args.cb_max_batch_tokens), "--log-level", "warning"], "/health",
             tf_make),
        ]
        for label, names, argv_for, ready, make in runs:
            if label not in wanted:
                continue
            if label == "transformers_serve" and (why := transformers_serve_unavailable(env)):
                servers[names[0]] = {"status": "not_run", "reason": why}
                print(f"{label}: not run: {why}", flush=True)
                continue
            port = free_port()
            server = Server(label, argv_for(port), env, f"http://127.0.0.1:{port}{ready}", tmp / f"{label}.log",
                            args.start_timeout)
            print(f"--- {label}: {' '.join(server.argv)}", flush=True)
            entry: dict[str, Any] = {"command": " ".join(server.argv).replace(str(tmp), "$TMP").replace(
                f"{Path.cwd()}{os.sep}", ""),
                                     "loadavg_before": _loadavg()}
            try:
                with server.running():
                    print(f"{label} ready in {server.startup_s} s", flush=True)
                    entry["startup_s"] = server.startup_s
                    figures = run_levels(f"http://127.0.0.1:{port}", names, make, plan)
                for name in names:
                    servers[name] = {"status": "ok", **entry, **figures[name], "loadavg_after": _loadavg()}
            except (ServerFailed, OSError) as exc:
                for name in names:
                    servers[name] = {"status": "failed", **entry, "reason": str(exc)[-2000:]}
                print(f"{label}: failed: {str(exc)[-600:]}", flush=True)
    levels = {name: {int(c): s for c, s in servers[name].get("levels", {}).items()} for name in servers}
    report["table"] = ratio_rows(levels, plan.concurrency)
    report["machine"]["loadavg_end"] = _loadavg()
    report["run_s"] = round(time.perf_counter() - t_run, 1)
    print()
    print(format_table(report["table"], levels))
    for name, entry in servers.items():
        if entry.get("status") != "ok":
            print(f"{name}: {entry['status']}: {entry.get('reason', '')[:300]}")
    print(f"run: {report['run_s']} s on {os.cpu_count()} CPUs")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
