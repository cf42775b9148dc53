"""The evaluate stage: generate kernels for a suite, verify them all, score, log, gate.

    kernelwright evaluate                                   # <workdir>/train/final on the held-out seed tasks
    kernelwright evaluate --suite builtin --model models:/kernelwright-coder@candidate --samples 4
    kernelwright evaluate --suite DIR --generations GEN_DIR # verify files someone else generated
    kernelwright evaluate --suite infill:heldout            # the synthesized infill tasks (infill_suite.py)
    kernelwright evaluate --ray auto --ray-gpu-fraction 0.25 # verification spread over a Ray cluster
    kernelwright evaluate --model M --generate-only --out E  # candidates only; check later with
    kernelwright evaluate --model M --generations E/generations --out E   # ... the same sampling scope

Generated code lands in `<out>/generations/<problem_id>/sample_<k>.py` and is verified from
there. Every sample gets the static checks and an NVRTC compile; on a machine with a CUDA device
(with --ray: a cluster with GPUs, verifier/ray_fanout.py) each one then runs the verification
protocol (verify.py), and the figures are fast_0, fast_1, the
fast_p curve, the geometric-mean speedup and roofline share, per category too. Without a GPU,
results say `gpu_verified: false` with the reason, and no correctness or speed figure is made up.
A registered model (`models:/...`) is tagged with its figures and the `champion` alias moves to it
when the gate (gate.py) says it is better.

`--generate-only` writes the candidates and `generation.json` (how they were sampled) and stops:
generation of several models can then share one GPU while their checks, run later from the
generations folders, time kernels one at a time (verification holds a host-wide timing lock). A
folder with that record keeps its sampling scope at the gate; other folders are `external`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import mlflow
from rich.progress import Progress

from kernelwright import atomic, jsontext
from kernelwright.base_model.perplexity import heldout_perplexity
from kernelwright.config import config_record, config_to_params
from kernelwright.errors import UsageError
from kernelwright.evaluation.candidates import candidates_from, from_completions, select_problems, write_generations
from kernelwright.evaluation.checking import Row, Verifier, check_candidates
from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.evaluation.gate import GateDecision, gate_evaluation
from kernelwright.evaluation.infill_suite import problem_files, problem_prompt
from kernelwright.evaluation.metrics import SuiteFigures, suite_figures
from kernelwright.evaluation.registry import EXTERNAL_SAMPLING, sampling_scope
from kernelwright.evaluation.report import (
    ARTIFACT_DIR,
    EXTERNAL_CANDIDATES,
    NOT_APPLICABLE_FILE,
    TAG_CHARS,
    candidate_artifact,
    inside,
    not_applicable_note,
    write_report,
)
from kernelwright.generation import FINISH_REASONS, HFBackend
from kernelwright.models import ModelRef, load_model, resolve_ref
from kernelwright.tracking import log_config
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.problems import Problem
from kernelwright.verifier.ray_fanout import (
    connected,
    import_ray,
    verify_on_ray,
)
from kernelwright.verifier.verdict import Verdict
from kernelwright.verifier.verify import cuda_available, run_workers
from kernelwright.workdir import resolve_workdir

GENERATION_RECORD = "generation.json"
NO_GPU_REASON = "no CUDA device on this machine: correctness and timing were not measured"
NO_RAY_GPU_REASON = "no GPU in the Ray cluster: correctness and timing were not measured"


@dataclass
class EvaluateResult:
    figures: SuiteFigures
    rows: list[Row]
    gpu_verified: bool
    gate: GateDecision | None
    gate_note: str
    gpu_reason: str = NO_GPU_REASON  # why nothing was GPU-verified (when gpu_verified is false)
    generate_s: float = 0.0  # wall time of generation (0 with --generations)
    check_s: float = 0.0  # wall time of the checks: static, NVRTC and, with a GPU, verification
    heldout_bits_per_char: float | None = None  # the generating model's, on the seed held-out answers
    finish_reasons: dict[str, int] = field(default_factory=dict)  # why the completions ended (GenerationRecord)

    @property
    def metrics(self) -> dict[str, float]:
        """Every figure that applies, by flat key (see metrics.py)."""
        return self.figures.flat()


@dataclass(frozen=True)
class EvaluationPlan:
    """What an evaluation will read and write, checked before any MLflow store is touched."""

    problems: list[Problem]
    model: str | None  # local folder or registry URI to generate with / to gate; None: none
    generations: Path  # the candidate files (written first when `generate`)
    generate: bool
    out: Path


def plan_evaluation(cfg: EvaluateConfig) -> EvaluationPlan:
    """The evaluate stage's config check (problems, generations folder, a local model), made without touching a
    store; it returns the plan it checked, which `run_evaluate` then follows."""
    workdir = resolve_workdir(cfg.workdir)
    out = Path(cfg.out) if cfg.out else workdir / "evaluate"
    problems = select_problems(cfg.suite, cfg.split, workdir)
    if cfg.ray:
        import_ray()
    model = cfg.model or (None if cfg.generations else str(workdir / "train" / "final"))
    if cfg.generations:
        if not Path(cfg.generations).is_dir():
            raise UsageError(f"generations folder not found: {cfg.generations}")
    elif model and not model.startswith("models:/") and not (Path(model) / "config.json").is_file():
        raise UsageError(f"no model at {model}: train one first, or pass --model PATH or models:/NAME@ALIAS")
    gen_dir = Path(cfg.generations) if cfg.generations else out / "generations"
    return EvaluationPlan(problems, model, gen_dir, not cfg.generations, out)


def suite_id(problems: Sequence[Problem], samples: int) -> str:
    """Digest of the problem files and the sample count: figures are comparable only within one."""
    h = hashlib.sha256(f"samples={samples}".encode())
    for p in sorted(problems, key=lambda p: p.id):
        h.update(p.id.encode())
        for path in problem_files(p):
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class GenerationRecord:
    """How a generations folder was sampled (its `generation.json`)."""

    model: str
    samples: int
    temperature: float
    max_new_tokens: int
    seed: int
    problems: int
    generate_s: float
    # teacher-forced bits per character of the seed corpus's held-out answers under the model (the figure the
    # base's pretraining reports: base_model.perplexity), whatever suite was generated for; None: not measured
    heldout_bits_per_char: float | None = None
    stop_loops: bool = False  # completions caught in a repetition loop were ended there (LoopStop)
    static_cache: bool = False  # generated with a static KV cache (its decoding step compiled on a GPU)
    # why the completions ended: counts of "stop" (the model ended it), "length" (max_new_tokens) and "loop"
    # (LoopStop), and each problem's, sample by sample; empty where not recorded
    finish_reasons: dict[str, int] = field(default_factory=dict)
    finish_reason_of: dict[str, list[str]] = field(default_factory=dict)
    # tokens each completion generated (its end of sequence not counted), each problem's sample by sample, and their
    # mean over every completion (how much of max_new_tokens the model uses); empty and None where not recorded
    new_tokens_of: dict[str, list[int]] = field(default_factory=dict)
    new_tokens_mean: float | None = None


def generate_into(folder: Path, problems: list[Problem], ref: ModelRef, cfg: EvaluateConfig) -> GenerationRecord:
    """`cfg.samples` completions per problem from `ref`, written as candidate files with `generation.json`."""
    start = time.perf_counter()
    model, tokenizer = load_model(ref)
    with Progress() as progress:
        backend = HFBackend(model, tokenizer, cfg.max_new_tokens, cfg.temperature, cfg.batch_size, cfg.seed, progress,
                            stop_loops=cfg.stop_loops, static_cache=cfg.static_cache)
        prompts = [problem_prompt(p) for p in problems]
        completions = backend.complete(prompts, cfg.samples)
    write_generations(folder, problems, [[c.text for c in row] for row in completions])
    generate_s = round(time.perf_counter() - start, 2)
    bits = round(heldout_perplexity(model, tokenizer).bits_per_char, 4) if cfg.heldout_nll else None
    reasons = {p.id: [c.finish_reason for c in row] for p, row in zip(problems, completions, strict=True)}
    counts = Counter(r for row in reasons.values() for r in row)
    tokens = {p.id: [c.new_tokens for c in row] for p, row in zip(problems, completions, strict=True)}
    flat_tokens = [n for row in tokens.values() for n in row]
    record = GenerationRecord(ref.uri, cfg.samples, cfg.temperature, cfg.max_new_tokens, cfg.seed, len(problems),
                              generate_s, bits, cfg.stop_loops, cfg.static_cache,
                              {r: counts[r] for r in FINISH_REASONS}, reasons, tokens,
                              round(sum(flat_tokens) / len(flat_tokens), 1) if flat_tokens else None)
    atomic.write_text(folder / GENERATION_RECORD, json.dumps(asdict(record), indent=1))
    return record


def generate_candidates(cfg: EvaluateConfig, plan: EvaluationPlan | None = None) -> GenerationRecord:
    """`--generate-only`: the candidates and their `generation.json`, no check."""
    plan = plan or plan_evaluation(cfg)
    if not plan.generate or plan.model is None:
        raise UsageError("--generate-only needs a model to generate with, not --generations")
    record = generate_into(plan.generations, plan.problems, resolve_ref(plan.model), cfg)
    if mlflow.active_run() is not None:
        _log_config(cfg, record.model)
        mlflow.log_metrics({"evaluate.generate_s": record.generate_s} | generation_metrics(asdict(record)))
    return record


def read_generation_record(folder: Path) -> dict[str, Any] | None:
    """A generations folder's `generation.json`; None when it has none or it is not a JSON object."""
    try:
        rec = jsontext.loads((folder / GENERATION_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def recorded_sampling(record: dict[str, Any] | None) -> str:
    """The sampling scope of a generation record (`read_generation_record`); `external` without one."""
    rec = record or {}
    try:
        return sampling_scope(float(rec["temperature"]), int(rec["max_new_tokens"]))
    except (KeyError, ValueError, TypeError):
        return EXTERNAL_SAMPLING


def verify_config(cfg: EvaluateConfig, workdir: Path) -> VerifyConfig:
    return VerifyConfig(timeout_s=cfg.timeout_s, seeds=cfg.verify_seeds, timing_budget_s=cfg.timing_budget_s,
                        compile_baseline=cfg.compile_baseline, split_build=cfg.split_build,
                        build_cache=str(workdir / "cache" / "builds"))


def verify_with_progress(cfgs: Sequence[VerifyConfig], jobs: int) -> list[Verdict]:
    """`run_workers` with a progress bar that moves as each candidate's verdict lands."""
    with Progress() as progress:
        task = progress.add_task("GPU verification", total=len(cfgs))
        return run_workers(cfgs, jobs, on_done=lambda _cfg, _v: progress.advance(task))


def ray_verifier(gpu_fraction: float) -> Verifier:
    """`verify_on_ray` over the connected cluster, with a progress bar as each candidate's verdict lands."""

    def run(cfgs: Sequence[VerifyConfig], jobs: int) -> list[Verdict]:
        with Progress() as progress:
            task = progress.add_task("GPU verification on Ray", total=len(cfgs))
            return verify_on_ray(cfgs, gpu_fraction, on_done=lambda _cfg, _v: progress.advance(task))

    return run


@contextmanager
def verification(cfg: EvaluateConfig, verifier: Verifier | None) -> Iterator[tuple[Verifier, bool, str]]:
    """(the verifier, whether there is a GPU to verify on, the reason when not): `verifier`, else worker
    processes here (a CUDA device here) or, with --ray, tasks on the cluster (GPUs in the cluster)."""
    if not cfg.ray:
        yield verifier or verify_with_progress, cuda_available(), NO_GPU_REASON
        return
    with connected(cfg.ray) as gpus:
        yield verifier or ray_verifier(cfg.ray_gpu_fraction), gpus > 0, NO_RAY_GPU_REASON


def run_evaluate(cfg: EvaluateConfig, verifier: Verifier | None = None,
                 plan: EvaluationPlan | None = None) -> EvaluateResult:
    """Generate (or read) candidates, check them, score them, and run the gate. `verifier` None: see
    `verification`."""
    plan = plan or plan_evaluation(cfg)
    workdir = resolve_workdir(cfg.workdir)
    ref = resolve_ref(plan.model) if plan.model else None
    start = time.perf_counter()
    record: dict[str, Any] | None
    if plan.generate:
        assert ref is not None
        record = asdict(generate_into(plan.generations, plan.problems, ref, cfg))
    else:
        record = read_generation_record(plan.generations)
    generated = time.perf_counter()
    folder = plan.generations if plan.generate else from_completions(plan.generations, plan.problems,
                                                                      plan.out / "generations")
    cands = candidates_from(folder, plan.problems, cfg.samples)
    jobs = cfg.jobs or os.cpu_count() or 1
    with verification(cfg, verifier) as (verify, gpu, reason):
        rows = check_candidates(cands, verify_config(cfg, workdir), jobs, gpu, verify, reason,
                                nvrtc_cache=workdir / "cache" / "nvrtc")
    checked = time.perf_counter()
    figures = suite_figures(rows, gpu, reason, cfg.own_kernel_share)
    decision, note = gate_evaluation(ref, figures.overall.values, suite_id(plan.problems, cfg.samples),
                                     recorded_sampling(record), cfg.gate_view, cfg.gate, gpu)
    result = EvaluateResult(figures, rows, gpu, decision, note, reason, generate_s=round(generated - start, 2),
                            check_s=round(checked - generated, 2),
                            heldout_bits_per_char=jsontext.number((record or {}).get("heldout_bits_per_char")),
                            finish_reasons=_finish_counts(record))
    write_report(plan.out, result_json(cfg, result) | {"generation": record}, figures, rows, gpu)
    if mlflow.active_run() is not None:
        _log(cfg, plan, result, ref, record)
    return result


def generation_metrics(record: dict[str, Any] | None) -> dict[str, float]:
    """The MLflow metrics of a generations folder's record (`generation.json`, or a GenerationRecord as a dict):
    `evaluate.finished_<reason>` counts, `evaluate.new_tokens_mean` and `evaluate.heldout_bits_per_char`, those it
    holds."""
    figures: dict[str, float] = {f"evaluate.finished_{r}": n for r, n in _finish_counts(record).items()}
    for key in ("new_tokens_mean", "heldout_bits_per_char"):
        value = jsontext.number((record or {}).get(key))
        if value is not None:
            figures[f"evaluate.{key}"] = value
    return figures


def _finish_counts(record: dict[str, Any] | None) -> dict[str, int]:
    counts = (record or {}).get("finish_reasons")
    if not isinstance(counts, dict):
        return {}
    return {r: n for r, n in counts.items() if r in FINISH_REASONS and isinstance(n, int) and not isinstance(n, bool)}


def result_json(cfg: EvaluateConfig, result: EvaluateResult) -> dict[str, Any]:
    return {
        "metrics": result.metrics, "not_applicable": result.figures.flat_not_applicable(),
        "gpu_verified": result.gpu_verified, "gpu_reason": "" if result.gpu_verified else result.gpu_reason,
        "gate": asdict(result.gate) if result.gate else None, "gate_note": result.gate_note,
        "seconds": {"generate_s": result.generate_s, "check_s": result.check_s},
        "heldout_bits_per_char": result.heldout_bits_per_char,
        "config": config_record(cfg), "samples": [asdict(r) for r in result.rows],
    }


def _table(rows: list[Row], out: Path, generations: Path) -> dict[str, list[Any]]:
    """The per-problem table, each candidate named by its place among the run's artifacts."""
    flat = [r.flat() | {"candidate": candidate_artifact(r.candidate, out, generations)} for r in rows]
    return {k: [f[k] for f in flat] for k in (flat[0] if flat else {})}


def _log_external_candidates(rows: list[Row], out: Path, generations: Path) -> None:
    """Candidate files from outside the results folder, under `evaluate/candidates/` (the table points there)."""
    files = [r.candidate for r in rows if r.candidate and not inside(r.candidate, out)]
    if not files:
        return
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            dest = Path(tmp, PurePosixPath(candidate_artifact(f, out, generations)).relative_to(EXTERNAL_CANDIDATES))
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)
        mlflow.log_artifacts(tmp, artifact_path=EXTERNAL_CANDIDATES)


def _log_config(cfg: EvaluateConfig, model_uri: str) -> None:
    mlflow.log_params({**config_to_params(cfg, "evaluate."), "evaluate.model_uri": model_uri})
    log_config(cfg, "evaluate")


def _log(cfg: EvaluateConfig, plan: EvaluationPlan, result: EvaluateResult, ref: ModelRef | None,
         record: dict[str, Any] | None) -> None:
    _log_config(cfg, ref.uri if ref else "")
    mlflow.log_metrics({f"evaluate.{k}": v for k, v in result.metrics.items()}
                       | {"evaluate.generate_s": result.generate_s, "evaluate.check_s": result.check_s}
                       | generation_metrics(record))
    not_applicable = result.figures.flat_not_applicable()
    mlflow.log_dict(not_applicable, NOT_APPLICABLE_FILE)
    note = not_applicable_note(not_applicable)
    mlflow.set_tags({"gpu_verified": str(result.gpu_verified).lower(),
                     "gpu_reason": "" if result.gpu_verified else result.gpu_reason,
                     "gate.promoted": str(bool(result.gate and result.gate.promote)).lower(),
                     "gate.note": result.gate_note[:TAG_CHARS], **({"not_applicable": note} if note else {})})
    if ref is not None and ref.version is not None:
        mlflow.set_tags({"model.name": ref.name or "", "model.version": ref.version})
    mlflow.log_table(_table(result.rows, plan.out, plan.generations), artifact_file=f"{ARTIFACT_DIR}/per_problem.json")
    _log_external_candidates(result.rows, plan.out, plan.generations)
    mlflow.log_artifacts(str(plan.out), artifact_path=ARTIFACT_DIR)
