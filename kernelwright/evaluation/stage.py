"""The evaluate stage (CPU level): generate for held-out tasks, static-check, NVRTC-compile.

    kernelwright evaluate                       # <workdir>/train/final on the held-out seed tasks
    kernelwright evaluate --model PATH --samples 4

Every sample is checked statically (AST: a real kernel, no fallback) and its device code is
compiled with NVRTC, which needs no GPU. GPU verification (correctness, timing, anti-cheat) is
the verification protocol's job: where it does not run, results say `gpu_verified: false` with
the reason, and no speedup or correctness figure is reported.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import mlflow
import torch
from rich.progress import Progress

from kernelwright import atomic
from kernelwright.config import config_to_params
from kernelwright.curation.seed import SeedTask, load_seed_tasks, split_tasks
from kernelwright.curation.spans import cuda_source_of
from kernelwright.errors import UsageError
from kernelwright.evaluation.generation import HFBackend
from kernelwright.evaluation.nvrtc_check import compile_many
from kernelwright.evaluation.plots import category_bars
from kernelwright.evaluation.static_checks import check_source
from kernelwright.prompting import extract_code, prompt_messages
from kernelwright.training.base_model import load_base_model, load_tokenizer
from kernelwright.workdir import resolve_workdir

NO_GPU_REASON = "no CUDA device on this machine: correctness and timing were not measured"
PROTOCOL_REASON = "GPU verification protocol not available yet (issue #3): correctness and timing not measured"


@dataclass
class EvaluateConfig:
    """Config of `kernelwright evaluate`."""

    model: str | None = field(default=None, metadata={"help": "Local HF checkpoint. None: <workdir>/train/final."})
    split: str = field(default="test", metadata={"help": "Seed tasks to evaluate on: test (held-out) or all."})
    samples: int = field(default=1, metadata={"help": "Completions per problem."})
    max_new_tokens: int = field(default=384, metadata={"help": "Generation budget per completion, in tokens."})
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature; 0: greedy."})
    batch_size: int = field(default=8, metadata={"help": "Prompts per generate() call."})
    seed: int = field(default=0, metadata={"help": "Sampling seed."})
    out: str | None = field(default=None, metadata={"help": "Results folder. None: <workdir>/evaluate."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})

    def __post_init__(self) -> None:
        if self.split not in ("test", "all"):
            raise ValueError(f"split must be test or all, not {self.split!r}")
        if self.samples < 1:
            raise ValueError("samples must be at least 1")


@dataclass
class SampleResult:
    task_id: str
    category: str
    sample: int
    static_ok: bool
    static_reasons: list[str]
    cuda_sources: int
    compiled: bool
    compile_s: float
    compile_log: str
    gpu_verified: bool
    gpu_reason: str
    completion_chars: int


def _compile_results(codes: list[str]) -> list[tuple[int, bool, float, str]]:
    sources = [cuda_source_of(c) for c in codes]
    results = compile_many([s for s in sources if s.strip()], workers=os.cpu_count() or 1)
    it = iter(results)
    out = []
    for src in sources:
        n = src.count("__global__")
        if not src.strip():
            out.append((0, False, 0.0, "no CUDA source string in the completion"))
            continue
        r = next(it)
        out.append((n, r.ok and n > 0, r.compile_s, r.log[-2000:]))
    return out


def check_completions(tasks: list[SeedTask], completions: list[list[str]]) -> list[SampleResult]:
    gpu_reason = PROTOCOL_REASON if torch.cuda.is_available() else NO_GPU_REASON
    flat = [(t, i, c) for t, cs in zip(tasks, completions, strict=True) for i, c in enumerate(cs)]
    codes = [extract_code(c) for _, _, c in flat]
    compiled = _compile_results(codes)
    results = []
    for (task, i, text), code, (n, ok, secs, log) in zip(flat, codes, compiled, strict=True):
        static = check_source(code)
        results.append(SampleResult(
            task_id=task.id, category=task.category, sample=i, static_ok=static.ok,
            static_reasons=static.reasons, cuda_sources=n, compiled=ok, compile_s=secs, compile_log=log,
            gpu_verified=False, gpu_reason=gpu_reason, completion_chars=len(text),
        ))
    return results


def summarise(results: list[SampleResult]) -> dict[str, float]:
    n = max(len(results), 1)
    metrics = {
        "samples": float(len(results)),
        "compile_rate": sum(r.compiled for r in results) / n,
        "static_pass_rate": sum(r.static_ok for r in results) / n,
        "compile_and_static_rate": sum(r.compiled and r.static_ok for r in results) / n,
        "gpu_verified_rate": sum(r.gpu_verified for r in results) / n,
    }
    by_cat: dict[str, list[SampleResult]] = defaultdict(list)
    for r in results:
        by_cat[r.category].append(r)
    for cat, rs in sorted(by_cat.items()):
        metrics[f"compile_rate.{cat}"] = sum(r.compiled for r in rs) / len(rs)
    return metrics


def run_evaluate(cfg: EvaluateConfig) -> dict[str, float]:
    workdir = resolve_workdir(cfg.workdir)
    model_dir = Path(cfg.model) if cfg.model else workdir / "train" / "final"
    if not (model_dir / "config.json").is_file():
        raise UsageError(f"no model at {model_dir}: train one first or pass --model PATH")
    out = Path(cfg.out) if cfg.out else workdir / "evaluate"
    tasks = load_seed_tasks()
    chosen = split_tasks(tasks)[1] if cfg.split == "test" else tasks
    tokenizer = load_tokenizer(model_dir)
    model = load_base_model(model_dir).eval()
    with Progress() as progress:
        backend = HFBackend(model, tokenizer, cfg.max_new_tokens, cfg.temperature, cfg.batch_size, cfg.seed, progress)
        completions = backend.generate([prompt_messages(t.reference) for t in chosen], cfg.samples)
    results = check_completions(chosen, completions)
    metrics = summarise(results)
    rows = [asdict(r) | {"completion": c} for r, c in zip(results, [c for cs in completions for c in cs], strict=True)]
    atomic.write_json(out / "results.json", {"metrics": metrics, "gpu_verified": False,
                                             "gpu_reason": results[0].gpu_reason if results else "", "samples": rows})
    category_bars({k.split(".", 1)[1]: v for k, v in metrics.items() if k.startswith("compile_rate.")},
                  "NVRTC compile rate by category", out / "compile_rate_by_category.png")
    if mlflow.active_run() is not None:
        mlflow.log_params({**config_to_params(cfg, "evaluate."), "evaluate.model_path": str(model_dir)})
        mlflow.log_metrics({f"evaluate.{k}": v for k, v in metrics.items()})
        mlflow.set_tag("gpu_verified", "false")
        mlflow.set_tag("gpu_reason", results[0].gpu_reason if results else "")
        table = {k: [r[k] for r in rows] for k in ("task_id", "category", "sample", "static_ok", "compiled",
                                                    "compile_s", "gpu_verified", "gpu_reason", "completion")}
        mlflow.log_table(table, artifact_file="evaluate/per_problem.json")
        mlflow.log_artifacts(str(out), artifact_path="evaluate")
    return metrics
