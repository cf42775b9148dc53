"""`kernelwright synthesize`: procedural tasks, verified on a GPU, split and written for curation.

    kernelwright synthesize --tasks 6000                   # a GPU host: verified pairs
    kernelwright synthesize --tasks 500 --verify none      # anywhere: unverified pairs, said so
    kernelwright curate --input .kernelwright/synthesize/train
    kernelwright evaluate --suite synth:heldout

Draw tasks (generator.py), split them by composition signature (split.py), decontaminate the
training side against every evaluation suite, verify the generator's solutions as trusted code in
batches on the GPU (trusted_batch.py: only correct pairs are kept; degenerate problems dropped;
`--min-speedup` keeps the fast ones), derive infill tasks from the correct solutions, and write
everything (outputs.py) with one MLflow run: counts per family and per reason, the speedup
distribution, the pairs as a dataset input. Checks are appended to `<out>.checks.jsonl` as
chunks finish, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from kernelwright import atomic, jsontext
from kernelwright.errors import NoCudaDevice, UsageError
from kernelwright.synthesis.config import SynthesizeConfig
from kernelwright.synthesis.generator import GENERATOR_VERSION, check_families, generate_tasks
from kernelwright.synthesis.split import decontaminate, split_tasks
from kernelwright.synthesis.task import SynthTask
from kernelwright.synthesis.trusted_batch import PairCheck, check_chunk
from kernelwright.synthesis.writing import SynthesizeResult, write_all
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


def check_synthesize_config(cfg: SynthesizeConfig) -> None:
    check_families(cfg.families)
    for folder in cfg.decontaminate_against:
        if not Path(folder).is_dir():
            raise UsageError(f"--decontaminate-against: folder not found: {folder}")
    if cfg.verify == "gpu" and not _cuda():
        raise NoCudaDevice("--verify gpu: no CUDA device on this machine (--verify none writes unverified pairs)")
    if cfg.teacher:
        from kernelwright.synthesis.teacher import TeacherSettings

        teacher_settings(cfg, TeacherSettings)  # bad teacher settings are refused here
        if cfg.teacher_problems not in (None, "synth", "builtin") and not Path(cfg.teacher_problems).is_dir():
            raise UsageError(f"--teacher-problems: folder not found: {cfg.teacher_problems}")
        if not _cuda():
            raise NoCudaDevice("--teacher: the teacher's candidates are judged on a GPU, and this machine has none")


def _cuda() -> bool:
    from kernelwright.verifier.verify import cuda_available

    return cuda_available()


def output_folder(cfg: SynthesizeConfig) -> Path:
    return Path(cfg.out) if cfg.out else resolve_workdir(cfg.workdir) / "synthesize"


def _digest(t: SynthTask) -> str:
    return hashlib.sha256((t.reference + "\0" + t.solution).encode()).hexdigest()[:20]


def _load_checks(path: Path) -> dict[str, PairCheck]:
    out: dict[str, PairCheck] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = jsontext.loads(line)
            out[row.pop("digest")] = PairCheck(**row)
        except (ValueError, TypeError, KeyError):
            continue  # a line cut by a kill: that task is checked again
    return out


def _check_job(tasks: list[SynthTask], build_root: str, time_share: float, lock: str, pch: bool) -> list[PairCheck]:
    return check_chunk(tasks, Path(build_root), time_share, lock, pch=pch)


def chunk_size(cfg: SynthesizeConfig, n: int, jobs: int) -> int:
    """`cfg.chunk`, or (0) about three chunks per worker, 16 to 128 solutions each: fewer builds
    of the torch headers, yet every worker busy until the end."""
    return cfg.chunk or max(16, min(128, -(-n // (3 * jobs))))


def verify_on_gpu(tasks: Sequence[SynthTask], cfg: SynthesizeConfig, checks_file: Path,
                  progress: Progress) -> dict[str, PairCheck]:
    """Every task's check (by task id): those of earlier runs from `checks_file`, the rest in
    chunks over worker processes, appended to `checks_file` as each chunk finishes."""
    from kernelwright.cuda.pch import build_header
    from kernelwright.verifier.verify import host_timing_lock

    done = _load_checks(checks_file)
    by_id = {t.id: done[_digest(t)] for t in tasks if _digest(t) in done}
    todo = [t for t in tasks if t.id not in by_id]
    if by_id:
        progress(f"resuming: {len(by_id)} checks from an earlier run, {len(todo)} to go")
    jobs = cfg.jobs or min(os.cpu_count() or 1, 16)
    size = chunk_size(cfg, len(todo), jobs)
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    pch = bool(chunks) and build_header(600.0)
    progress(f"{len(chunks)} chunks of up to {size} solutions over {jobs} workers; torch's precompiled header: "
             f"{'yes' if pch else 'no'}")
    build_root = str(checks_file.parent / ".synthesize-builds")
    digests = {t.id: _digest(t) for t in todo}
    workers = max(1, min(jobs, len(chunks) or 1))
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool, \
            checks_file.open("a", encoding="utf-8") as fh:
        futures = [pool.submit(_check_job, c, build_root, cfg.time_share, host_timing_lock(), pch) for c in chunks]
        for n, fut in enumerate(as_completed(futures), 1):
            for check in fut.result():
                by_id[check.task_id] = check
                fh.write(json.dumps({"digest": digests[check.task_id], **asdict(check)}) + "\n")
            fh.flush()
            correct = sum(c.correct for c in by_id.values())
            progress(f"checked {len(by_id)}/{len(tasks)} ({correct} correct), chunk {n}/{len(chunks)}")
    return by_id


def run_synthesize(cfg: SynthesizeConfig, progress: Progress = log.info) -> SynthesizeResult:
    start = time.perf_counter()
    out = output_folder(cfg)
    out.parent.mkdir(parents=True, exist_ok=True)
    gpu = cfg.verify == "gpu" or (cfg.verify == "auto" and _cuda())
    tasks = list(generate_tasks(cfg.tasks, cfg.seed, cfg.families))
    progress(f"drew {len(tasks)} tasks ({dict(Counter(t.family for t in tasks))})")
    train, heldout = split_tasks(tasks, cfg.seed, cfg.heldout_share)
    decon = decontaminate(train, cfg.decontaminate_against, evaluation_problems(), {t.signature for t in heldout},
                          cfg.decontam_ngram, cfg.decontam_min_share)
    progress(f"split: {len(decon.kept)} train ({len(decon.by_ngram)} dropped by n-gram overlap, "
             f"{len(decon.by_signature)} by signature), {len(heldout)} held out")
    checks: dict[str, PairCheck] = {}
    verify_s = 0.0
    if gpu:
        t0 = time.perf_counter()
        checks = verify_on_gpu([*decon.kept, *heldout], cfg, out.with_name(out.name + ".checks.jsonl"), progress)
        verify_s = time.perf_counter() - t0
    else:
        progress("no GPU verification: the pairs are written unverified (curation refuses them unless "
                 "--allow-unverified)")
    provenance = {"generator_version": GENERATOR_VERSION, "generator_seed": cfg.seed}
    extra = teacher_writer(cfg, decon.kept, progress) if cfg.teacher else None
    result = write_all(out, cfg, decon, heldout, checks, gpu, provenance, extra)
    result.wall_s = time.perf_counter() - start
    result.verify_s = verify_s
    if gpu and verify_s > 0:
        result.verified_per_hour = sum(c.correct for c in checks.values()) * 3600.0 / verify_s
    atomic.write_json(out / "result.json", describe(result))
    _log_times(result)
    return result


def _log_times(result: SynthesizeResult) -> None:
    import mlflow

    if mlflow.active_run() is not None:
        mlflow.log_metrics({"wall_s": result.wall_s, "verify_s": result.verify_s,
                            **({"verified_per_hour": result.verified_per_hour} if result.verified_per_hour else {})})
        mlflow.log_artifact(str(result.out / "result.json"))


def teacher_settings(cfg: SynthesizeConfig, cls: Any) -> Any:
    return cls(url=cfg.teacher, model=cfg.teacher_model, k=cfg.teacher_k, temperature=cfg.teacher_temperature,
               max_tokens=cfg.teacher_max_tokens)


def teacher_problems(cfg: SynthesizeConfig, train: Sequence[SynthTask], scratch: Path) -> list[Any]:
    """The problems the teacher writes for: a folder, the builtin suite, or this run's training tasks."""
    from importlib import resources

    from kernelwright.synthesis.outputs import write_heldout
    from kernelwright.verifier.problems import load_problems

    if cfg.teacher_problems in (None, "synth"):
        write_heldout(scratch, train)
        return load_problems(scratch)
    if cfg.teacher_problems == "builtin":
        return load_problems(Path(str(resources.files("kernelwright") / "evaluation" / "suite")))
    return load_problems(Path(cfg.teacher_problems))


def teacher_writer(cfg: SynthesizeConfig, train: Sequence[SynthTask], progress: Progress) -> Callable[[Path], None]:
    """Ask the teacher, judge its candidates with the full judge, and return what writes the pairs."""
    import tempfile

    from kernelwright.synthesis import teacher as t

    scratch = Path(tempfile.mkdtemp(prefix="kw_teacher_"))
    problems = teacher_problems(cfg, train, scratch / "problems")
    progress(f"teacher {cfg.teacher}: {cfg.teacher_k} candidates for each of {len(problems)} problems")
    answers = t.ask_teacher(problems, teacher_settings(cfg, t.TeacherSettings))
    jobs = cfg.jobs or min(os.cpu_count() or 1, 16)
    pairs = t.teacher_pairs(problems, answers, lambda items: t.judge_candidates(items, jobs, 300.0),
                            scratch / "candidates")
    progress(f"teacher: {len(pairs)} of {len(problems)} problems have a correct candidate "
             f"({len(answers.errors)} engine errors)")

    def write(tmp: Path) -> None:
        if pairs:
            t.write_pairs(pairs, tmp / "teacher")

    return write


def evaluation_problems() -> dict[str, str]:
    """Every evaluation problem the training side must not overlap: the held-out seed tasks and the builtin suite."""
    from importlib import resources

    from kernelwright.seed import load_seed_tasks
    from kernelwright.seed import split_tasks as seed_split

    problems = {f"seed/{t.id}": t.reference + "\n" + t.solution for t in seed_split(load_seed_tasks())[1]}
    suite = Path(str(resources.files("kernelwright") / "evaluation" / "suite"))
    for path in sorted(suite.rglob("*.py")):
        if not path.name.startswith("_"):
            problems[f"builtin/{path.relative_to(suite).with_suffix('').as_posix()}"] = path.read_text(encoding="utf-8")
    return problems


def describe(result: SynthesizeResult) -> dict[str, Any]:
    return asdict(result) | {"out": str(result.out)}
