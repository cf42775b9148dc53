"""Serving throughput on the CPU: `kernelwright serve` against `mlflow models serve` and `transformers serve`.

    .venv/bin/python bench/serve_throughput.py --json docs/results/serve_throughput_cpu.json \
        [--concurrency 1,8,32] [--requests N] [--max-new-tokens 16]
    .venv/bin/python bench/serve_throughput.py --model pipeline \
        --json docs/results/serve_throughput_pipeline_model_cpu.json [--base PATH]

In one run: the model is registered in a temporary local MLflow store as
models:/kernelwright-coder@champion: with `--model tiny-random` (the default) the tiny model of
`build_tiny_model` (Qwen2, random weights, a tokenizer trained on the seed corpus); with `--model
pipeline` the kind of model the pipeline makes, a base of `kernelwright.base_model` (LFM2's shape:
short-convolution layers below attention): `--base PATH`, else the tiny base of ./.kernelwright
when it has been built, else a micro base pretrained now. Both are loaded as the stages load a
checkpoint. Then three servers of that registered version start one after the other, each on a
free loopback port, and are stopped before the next starts (and on any error):

- `kernelwright serve --model models:/kernelwright-coder@champion`, driven through
  POST /v1/kernels/generate with `compile_check: true`, then the same requests with
  `compile_check: false` (one process: the check is a per-request field);
- `mlflow models serve -m models:/kernelwright-coder@champion --env-manager local`, POST /invocations
  with the rendered chat prompt;
- `transformers serve --continuous-batching` of the registered version's files (its `model/` weights
  with its tokenizer), POST /v1/chat/completions with the same messages. Its continuous batching
  holds attention layers only: when one probe request fails (an LFM2 model answers 500, "Invalid
  layer type: conv"), that is recorded as `transformers_serve_continuous_batching` with the reason,
  and `transformers serve` without it is measured as the transformers baseline (`continuous_batching`
  in its entry says which ran).

kernelwright serves with its defaults (`batching: auto`): continuous batching for the tiny model,
sequential with dynamic batching for a model with convolution layers (`kernelwright_batching` in
the report).

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

This file is the command line and the JSON report; `serve_launchers.py` starts the servers,
`serve_load.py` drives them and `serve_stats.py` holds the statistics and the printed table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from serve_launchers import (
    Launch,
    Registered,
    Server,
    ServerFailed,
    free_port,
    launches,
    register_pipeline_model,
    register_tiny_model,
    transformers_serve_unavailable,
)
from serve_load import Plan, loadavg, run_levels
from serve_stats import format_table, ratio_rows, requests_for

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = ("tiny-random", "pipeline")
TF_SERVE_CB = "transformers_serve_continuous_batching"


def parse_concurrency(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"concurrency must be positive integers separated by commas, not {text!r}")
    return values


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--model", choices=MODELS, default="tiny-random",
                        help="tiny-random: the tiny Qwen2 of build_tiny_model; pipeline: a base of the pipeline's "
                             "kind (LFM2 shape; --base, else ./.kernelwright's tiny base, else a micro one built now)")
    parser.add_argument("--base", type=Path, default=None, help="with --model pipeline: the base checkpoint folder")
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
    return parser


def _report_head(args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
    """The report's command, machine, versions and settings, with no server yet."""
    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "sched_affinity_cpus": len(os.sched_getaffinity(0)),
                    "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_start": loadavg()},
        "versions": _versions(), "git": _git(),
        "settings": {"concurrency": plan.concurrency, "requests_per_level": {
            str(c): requests_for(c, plan.requests) for c in plan.concurrency}, "max_new_tokens": plan.max_new_tokens,
            "temperature": 0, "repair_attempts": 0, "warmup_requests": plan.warmup,
            "torch_threads_per_server": args.torch_threads, "kernelwright_compile_host": False,
            "kernelwright_max_queue": 0, "mlflow_workers": args.mlflow_workers,
            "model": args.model, "transformers_cb_num_blocks": args.cb_num_blocks,
            "transformers_cb_max_batch_tokens": args.cb_max_batch_tokens,
            "prompts": "seed references in rotation (kernelwright.prompting.prompt_messages)"},
        "servers": {},
    }


def _server_env(workdir: Path, torch_threads: int) -> dict[str, str]:
    """The servers' environment: offline, the temporary MLflow store, `torch_threads` threads; no API keys."""
    env = {k: v for k, v in os.environ.items() if k != "KERNELWRIGHT_API_KEYS"}
    env.update({"MLFLOW_TRACKING_URI": f"sqlite:///{workdir / 'mlflow.db'}", "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": str(torch_threads),
                "MKL_NUM_THREADS": str(torch_threads), "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
    return env


def _run_servers(args: argparse.Namespace, plan: Plan, report: dict[str, Any]) -> None:
    """Register the tiny model, then run each wanted server in turn, into `report["servers"]`."""
    wanted = {s.strip() for s in args.servers.split(",") if s.strip()}
    servers: dict[str, Any] = report["servers"]
    with tempfile.TemporaryDirectory(prefix="kw_bench_serve_") as tmp_name:
        tmp = Path(tmp_name)
        workdir = tmp / "work"
        workdir.mkdir()
        env = _server_env(workdir, args.torch_threads)
        os.environ.update({k: env[k] for k in ("MLFLOW_TRACKING_URI", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")})
        print(f"building and registering the {args.model} model ...", flush=True)
        reg, report["model"] = _register(args, workdir, plan)
        print(f"registered {reg.uri} (version {reg.version}, {reg.parameters:,} parameters) in {reg.build_s} s",
              flush=True)
        for launch in launches(reg, workdir, tmp, plan, mlflow_workers=args.mlflow_workers,
                               cb_num_blocks=args.cb_num_blocks, cb_max_batch_tokens=args.cb_max_batch_tokens):
            if launch.label not in wanted:
                continue
            if launch.label == "transformers_serve" and (why := transformers_serve_unavailable(env)):
                servers[launch.names[0]] = {"status": "not_run", "reason": why}
                print(f"{launch.label}: not run: {why}", flush=True)
                continue
            servers.update(_run_with_fallback(launch, env, tmp, plan, args.start_timeout))


def _register(args: argparse.Namespace, workdir: Path, plan: Plan) -> tuple[Registered, dict[str, Any]]:
    """The registered model and what the report says of it: its shape and the batching kernelwright serves it with."""
    from transformers import AutoConfig

    from kernelwright.serving.batching import paged_cache_refuses

    if args.model == "pipeline":
        reg, origin = register_pipeline_model(workdir, plan.max_new_tokens, args.base)
    else:
        reg, origin = register_tiny_model(workdir, plan.max_new_tokens), "kernelwright.models.TinyModelSpec()"
    config = AutoConfig.from_pretrained(reg.checkpoint)
    refused = paged_cache_refuses(config)
    return reg, {"uri": reg.uri, "version": reg.version, "parameters": reg.parameters,
                 "build_and_register_s": reg.build_s, "kind": args.model, "origin": origin,
                 "model_type": config.model_type, "layer_types": getattr(config, "layer_types", None),
                 "kernelwright_batching": f"sequential (auto: {', '.join(refused)} layers)" if refused
                 else "continuous (auto)"}


def _run_with_fallback(launch: Launch, env: dict[str, str], tmp: Path, plan: Plan,
                       start_timeout: float) -> dict[str, Any]:
    """`launch` run; when it failed and has a fallback, its failure kept under its own name and the fallback run."""
    entries = _run_server(launch, env, tmp, plan, start_timeout)
    if launch.fallback is None or all(e["status"] == "ok" for e in entries.values()):
        return {name: {**e, "continuous_batching": True} if launch.fallback else e for name, e in entries.items()}
    failed = {TF_SERVE_CB: entries[launch.names[0]]}
    print(f"{launch.label}: measuring {launch.fallback.label} instead", flush=True)
    fallback = _run_server(launch.fallback, env, tmp, plan, start_timeout)
    return {**failed, **{name: {**e, "continuous_batching": False} for name, e in fallback.items()}}


def _run_server(launch: Launch, env: dict[str, str], tmp: Path, plan: Plan, start_timeout: float) -> dict[str, Any]:
    """One server started on a free port, every level run against it, and stopped: its entries by result name."""
    label, names = launch.label, launch.names
    port = free_port()
    server = Server(label, launch.argv_for(port), env, f"http://127.0.0.1:{port}{launch.ready}", tmp / f"{label}.log",
                    start_timeout)
    print(f"--- {label}: {' '.join(server.argv)}", flush=True)
    command = " ".join(server.argv).replace(str(tmp), "$TMP").replace(f"{Path.cwd()}{os.sep}", "")
    entry: dict[str, Any] = {"command": command, "loadavg_before": loadavg()}
    servers: dict[str, Any] = {}
    try:
        with server.running():
            print(f"{label} ready in {server.startup_s} s", flush=True)
            entry["startup_s"] = server.startup_s
            if launch.probe is not None and (why := launch.probe(f"http://127.0.0.1:{port}")):
                raise ServerFailed(why)
            figures = run_levels(f"http://127.0.0.1:{port}", names, launch.make, plan)
        for name in names:
            servers[name] = {"status": "ok", **entry, **figures[name], "loadavg_after": loadavg()}
    except (ServerFailed, OSError) as exc:
        log_end = server.log_tail(1500).replace(f"{Path.cwd()}/", "")  # whole; paths relative to the run
        for name in names:
            servers[name] = {"status": "failed", **entry, "reason": str(exc)[-2000:], "log_end": log_end}
        print(f"{label}: failed: {str(exc)[-600:]}", flush=True)
    return servers


def _finish(report: dict[str, Any], plan: Plan, t_run: float, json_path: Path | None) -> None:
    """The ratio table and the run's end figures into `report`; print the table, write the JSON."""
    servers: dict[str, Any] = report["servers"]
    levels = {name: {int(c): s for c, s in servers[name].get("levels", {}).items()} for name in servers}
    report["table"] = ratio_rows(levels, plan.concurrency)
    report["machine"]["loadavg_end"] = loadavg()
    report["run_s"] = round(time.perf_counter() - t_run, 1)
    print()
    print(format_table(report["table"], levels))
    for name, entry in servers.items():
        if entry.get("status") != "ok":
            print(f"{name}: {entry['status']}: {entry.get('reason', '')[:300]}")
    print(f"run: {report['run_s']} s on {os.cpu_count()} CPUs")
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    args = _parser().parse_args()
    plan = Plan(args.concurrency, args.requests, args.max_new_tokens, args.warmup, args.request_timeout)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers' `finally` stops them
    t_run = time.perf_counter()
    report = _report_head(args, plan)
    _run_servers(args, plan, report)
    _finish(report, plan, t_run, args.json)


if __name__ == "__main__":
    main()
