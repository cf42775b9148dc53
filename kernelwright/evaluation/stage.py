"""The evaluate stage: generate kernels for a suite, verify them all, score, log, gate.

    kernelwright evaluate                                   # <workdir>/train/final on the held-out seed tasks
    kernelwright evaluate --suite builtin --model models:/kernelwright-coder@candidate --samples 4
    kernelwright evaluate --suite DIR --generations GEN_DIR # verify files someone else generated

Generated code lands in `<out>/generations/<problem_id>/sample_<k>.py` and is verified from
there. Every sample gets the static checks and an NVRTC compile; on a machine with a CUDA device
each one then runs the verification protocol (verify.py), and the figures are fast_0, fast_1, the
fast_p curve, the geometric-mean speedup and roofline share, per category too. Without a GPU,
results say `gpu_verified: false` with the reason, and no correctness or speed figure is made up.
A registered model (`models:/...`) is tagged with its figures and the `champion` alias moves to it
when the gate (gate.py) says it is better.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mlflow
from rich.progress import Progress

from kernelwright import atomic
from kernelwright.config import config_to_params
from kernelwright.evaluation.candidates import BUILTIN, candidates_from, select_problems, write_generations
from kernelwright.evaluation.checking import Row, Verifier, check_candidates
from kernelwright.evaluation.gate import GateDecision
from kernelwright.evaluation.metrics import FAST_P_GRID, suite_metrics
from kernelwright.evaluation.plots import category_groups, speedup_distribution
from kernelwright.evaluation.registry import record_and_gate
from kernelwright.generation import HFBackend
from kernelwright.models import ModelRef, load_model, resolve_ref
from kernelwright.prompting import prompt_messages
from kernelwright.verifier.problems import Problem
from kernelwright.verifier.verdict import Verdict
from kernelwright.verifier.verify import VerifyConfig, cuda_available, run_workers
from kernelwright.workdir import resolve_workdir

NO_GPU_REASON = "no CUDA device on this machine: correctness and timing were not measured"


@dataclass
class EvaluateConfig:
    """Config of `kernelwright evaluate`."""

    model: str | None = field(default=None, metadata={
        "help": "Local HF checkpoint or registry URI (models:/NAME@ALIAS, models:/NAME/VERSION). "
                "None: <workdir>/train/final. With --generations it only names the model for the gate."})
    suite: str | None = field(default=None, metadata={
        "help": f"KernelBench-style problem folder, or '{BUILTIN}' for kernelwright's suite. "
                "None: the seed corpus tasks of --split."})
    generations: str | None = field(default=None, metadata={
        "help": "Folder of candidate files (<problem_id>/sample_<k>.py or <problem_id>.py) to verify "
                "instead of generating."})
    split: str = field(default="test", metadata={"help": "Seed tasks when no --suite: test (held-out) or all."})
    samples: int = field(default=1, metadata={"help": "Candidates per problem."})
    max_new_tokens: int = field(default=384, metadata={"help": "Generation budget per completion, in tokens."})
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature; 0: greedy."})
    batch_size: int = field(default=8, metadata={"help": "Prompts per generate() call."})
    seed: int = field(default=0, metadata={"help": "Sampling seed."})
    jobs: int = field(default=0, metadata={"help": "Verification workers (builds run in parallel); 0: one per core."})
    timeout_s: float = field(default=300.0, metadata={"help": "Wall-clock limit per candidate, build included."})
    verify_seeds: int = field(default=2, metadata={"help": "Seeds per input distribution in the correctness check."})
    timing_budget_s: float = field(default=1.0, metadata={"help": "Seconds of timed trials per model and shape."})
    split_build: bool = field(default=True, metadata={
        "help": "Split build of candidates' kernels (see `kernelwright verify --help`); off: build as written."})
    compile_baseline: bool = field(default=True, metadata={"help": "Also time torch.compile of the reference."})
    gate: bool = field(default=True, metadata={
        "help": "Tag a registered model with its figures and move `champion` when it wins; off: report only."})
    out: str | None = field(default=None, metadata={"help": "Results folder. None: <workdir>/evaluate."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})

    def __post_init__(self) -> None:
        if self.split not in ("test", "all"):
            raise ValueError(f"split must be test or all, not {self.split!r}")
        if self.samples < 1:
            raise ValueError("samples must be at least 1")
        if self.jobs < 0:
            raise ValueError("jobs must be 0 (one per core) or more")


@dataclass
class EvaluateResult:
    metrics: dict[str, float]
    rows: list[Row]
    gpu_verified: bool
    gate: GateDecision | None
    gate_note: str


def suite_id(problems: Sequence[Problem], samples: int) -> str:
    """Digest of the problem files and the sample count: figures are comparable only within one."""
    h = hashlib.sha256(f"samples={samples}".encode())
    for p in sorted(problems, key=lambda p: p.id):
        h.update(p.id.encode())
        h.update(p.path.read_bytes())
    return h.hexdigest()[:16]


def generate_into(folder: Path, problems: list[Problem], ref: ModelRef, cfg: EvaluateConfig) -> None:
    model, tokenizer = load_model(ref)
    with Progress() as progress:
        backend = HFBackend(model, tokenizer, cfg.max_new_tokens, cfg.temperature, cfg.batch_size, cfg.seed, progress)
        prompts = [prompt_messages(p.path.read_text(encoding="utf-8")) for p in problems]
        completions = backend.generate(prompts, cfg.samples)
    write_generations(folder, problems, completions)


def verify_config(cfg: EvaluateConfig, workdir: Path) -> VerifyConfig:
    return VerifyConfig(timeout_s=cfg.timeout_s, seeds=cfg.verify_seeds, timing_budget_s=cfg.timing_budget_s,
                        compile_baseline=cfg.compile_baseline, split_build=cfg.split_build,
                        build_cache=str(workdir / "cache" / "builds"))


def _gate(ref: ModelRef | None, cfg: EvaluateConfig, gpu: bool, metrics: dict[str, float],
          suite: str) -> tuple[GateDecision | None, str]:
    if not cfg.gate:
        return None, "gate off (--gate false)"
    if ref is None or ref.version is None:
        return None, "the model is not a registered version (pass --model models:/NAME@ALIAS to gate it)"
    if not gpu:
        return None, "not GPU-verified: fast_1 was not measured, so the champion stays"
    decision = record_and_gate(ref, metrics, suite)
    return decision, decision.reason


def verify_with_progress(cfgs: Sequence[VerifyConfig], jobs: int) -> list[Verdict]:
    """`run_workers` with a progress bar that moves as each candidate's verdict lands."""
    with Progress() as progress:
        task = progress.add_task("GPU verification", total=len(cfgs))
        return run_workers(cfgs, jobs, on_done=lambda _cfg, _v: progress.advance(task))


def evaluate(cfg: EvaluateConfig, verifier: Verifier = verify_with_progress) -> EvaluateResult:
    """Generate (or read) candidates, check them, score them, and run the gate."""
    workdir = resolve_workdir(cfg.workdir)
    out = Path(cfg.out) if cfg.out else workdir / "evaluate"
    problems = select_problems(cfg.suite, cfg.split)
    model_arg = cfg.model or (None if cfg.generations else str(workdir / "train" / "final"))
    ref = resolve_ref(model_arg) if model_arg else None
    gen_dir = Path(cfg.generations) if cfg.generations else out / "generations"
    if not cfg.generations:
        assert ref is not None
        generate_into(gen_dir, problems, ref, cfg)
    cands = candidates_from(gen_dir, problems, cfg.samples)
    gpu = cuda_available()
    jobs = cfg.jobs or os.cpu_count() or 1
    rows = check_candidates(cands, verify_config(cfg, workdir), jobs, gpu, verifier, NO_GPU_REASON)
    metrics = suite_metrics(rows)
    decision, note = _gate(ref, cfg, gpu, metrics, suite_id(problems, cfg.samples))
    result = EvaluateResult(metrics, rows, gpu, decision, note)
    _write(out, cfg, result)
    if mlflow.active_run() is not None:
        _log(cfg, out, result, ref)
    return result


def run_evaluate(cfg: EvaluateConfig) -> dict[str, float]:
    return evaluate(cfg).metrics


def _category_figures(metrics: dict[str, float]) -> dict[str, dict[str, float]]:
    cats: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        if key.startswith("category."):
            cat, _, name = key[len("category."):].rpartition(".")
            cats.setdefault(cat, {})[name] = value
    return cats


def _write(out: Path, cfg: EvaluateConfig, result: EvaluateResult) -> None:
    atomic.write_json(out / "results.json", {
        "metrics": result.metrics, "gpu_verified": result.gpu_verified,
        "gpu_reason": "" if result.gpu_verified else NO_GPU_REASON,
        "gate": asdict(result.gate) if result.gate else None, "gate_note": result.gate_note,
        "config": asdict(cfg), "samples": [asdict(r) for r in result.rows],
    })
    keys = ["compile_rate", "fast_0", "fast_1"] if result.gpu_verified else ["compile_rate"]
    category_groups(_category_figures(result.metrics), keys, "per category", out / "per_category.png")
    if result.gpu_verified:
        speedups = [r.verdict.speedup for r in result.rows if r.verdict.correct and r.verdict.speedup]
        fast = {p: result.metrics[f"fast_p.{p:g}"] for p in FAST_P_GRID}
        speedup_distribution([float(s) for s in speedups if s], fast, out / "speedup_distribution.png")


def _table(rows: list[Row]) -> dict[str, list[Any]]:
    flat = [r.flat() for r in rows]
    return {k: [f[k] for f in flat] for k in (flat[0] if flat else {})}


def _log(cfg: EvaluateConfig, out: Path, result: EvaluateResult, ref: ModelRef | None) -> None:
    mlflow.log_params({**config_to_params(cfg, "evaluate."), "evaluate.model_uri": ref.uri if ref else ""})
    mlflow.log_metrics({f"evaluate.{k}": v for k, v in result.metrics.items() if not math.isnan(v)})
    mlflow.set_tags({"gpu_verified": str(result.gpu_verified).lower(),
                     "gpu_reason": "" if result.gpu_verified else NO_GPU_REASON,
                     "gate.promoted": str(bool(result.gate and result.gate.promote)).lower(),
                     "gate.note": result.gate_note[:500]})
    if ref is not None and ref.version is not None:
        mlflow.set_tags({"model.name": ref.name or "", "model.version": ref.version})
    mlflow.log_table(_table(result.rows), artifact_file="evaluate/per_problem.json")
    mlflow.log_artifacts(str(out), artifact_path="evaluate")


def results_table(result: EvaluateResult) -> Any:
    """A rich table of the figures, overall and per category (for the CLI)."""
    from rich.table import Table

    keys = ["samples", "compile_rate", "gpu_verified_rate", "cheat_rate"]
    if result.gpu_verified:
        keys += ["fast_0", "fast_1", "geomean_speedup", "mean_roofline_share"]
    table = Table(title="evaluation" + ("" if result.gpu_verified else f" ({NO_GPU_REASON})"))
    table.add_column("group")
    for k in keys:
        table.add_column(k, justify="right")
    groups = {"all": result.metrics, **_category_figures(result.metrics)}
    for name, figures in groups.items():
        table.add_row(name, *[f"{figures[k]:.3g}" if k in figures else "-" for k in keys])
    return table
