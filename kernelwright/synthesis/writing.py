"""The end of a synthesize run: keep the pairs that passed, write every layout, log the run to MLflow.

The output folder is written whole into a sibling temporary folder and then swapped in
(`atomic.write_dir`), so a killed run leaves the previous output as it was.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from kernelwright import atomic
from kernelwright.synthesis.config import SynthesizeConfig
from kernelwright.synthesis.outputs import pair_meta, write_heldout, write_manifest, write_pair
from kernelwright.synthesis.split import Decontamination
from kernelwright.synthesis.task import SynthTask
from kernelwright.synthesis.trusted_batch import PairCheck

log = logging.getLogger(__name__)


@dataclass
class SynthesizeResult:
    out: Path
    tasks: int
    train_kept: int
    heldout_kept: int
    verified: bool  # the pairs were verified on a GPU
    reasons: dict[str, int] = field(default_factory=dict)  # status of every checked task
    wall_s: float = 0.0
    verify_s: float = 0.0
    verified_per_hour: float | None = None
    infill: dict[str, int] = field(default_factory=dict)  # infill tasks per split


def kept(task: SynthTask, check: PairCheck | None, gpu: bool, min_speedup: float) -> str:
    """Why a task is not kept ("" when it is)."""
    if not gpu:
        return ""
    if check is None:
        return "not_checked"
    if not check.correct:
        return check.status
    if min_speedup > 0 and (check.speedup is None or check.speedup < min_speedup):
        return "below_min_speedup"
    return ""


def pairs_frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    schema = {"id": pl.Utf8, "split": pl.Utf8, "family": pl.Utf8, "signature": pl.Utf8, "dtype": pl.Utf8,
              "template": pl.Utf8, "kept": pl.Boolean, "reason": pl.Utf8, "verified_by": pl.Utf8,
              "speedup": pl.Float64, "custom_kernel_time_share": pl.Float64, "roofline_share": pl.Float64}
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema)


def write_all(out: Path, cfg: SynthesizeConfig, decon: Decontamination, heldout: Sequence[SynthTask],
              checks: Mapping[str, PairCheck], gpu: bool, provenance: Mapping[str, Any],
              extra: Callable[[Path], None] | None = None) -> SynthesizeResult:
    """Keep, write (and `extra(tmp)` into the same new folder), and log the run."""
    rows: list[dict[str, Any]] = []
    keep: dict[str, list[SynthTask]] = {"train": [], "heldout": []}
    for split, tasks in (("train", decon.kept), ("heldout", heldout)):
        for t in tasks:
            check = checks.get(t.id)
            why = kept(t, check, gpu, cfg.min_speedup)
            if not why:
                keep[split].append(t)
            rows.append({"id": t.id, "split": split, "family": t.family, "signature": t.signature, "dtype": t.dtype,
                         "template": t.template, "kept": not why, "reason": why or (check.status if check else
                                                                                    "unverified"),
                         "verified_by": check.verified_by if check else None,
                         "speedup": check.speedup if check else None,
                         "custom_kernel_time_share": check.custom_kernel_time_share if check else None,
                         "roofline_share": check.roofline_share if check else None})
    frame = pairs_frame(rows)
    infill_counts: dict[str, int] = {}

    def fill(tmp: Path) -> None:
        for t in keep["train"]:
            write_pair(tmp / "train", t, pair_meta(t, checks.get(t.id), provenance))
        for t in keep["heldout"]:
            write_pair(tmp / "heldout_solutions", t, pair_meta(t, checks.get(t.id), provenance))
        write_heldout(tmp / "heldout", keep["heldout"])
        if cfg.infill:
            infill_counts.update(write_infill_splits(tmp / "infill", keep, checks))
        if extra is not None:
            extra(tmp)
        frame.write_parquet(tmp / "pairs.parquet")
        write_manifest(tmp, manifest(cfg, decon, keep, frame, gpu, provenance, infill_counts))

    atomic.write_dir(out, fill)
    reasons = dict(Counter(r["reason"] for r in rows))
    result = SynthesizeResult(out=out, tasks=len(rows), train_kept=len(keep["train"]),
                              heldout_kept=len(keep["heldout"]), verified=gpu, reasons=reasons, infill=infill_counts)
    log_synthesize_run(out, cfg, frame, result, provenance)
    return result


def write_infill_splits(folder: Path, keep: Mapping[str, Sequence[SynthTask]],
                        checks: Mapping[str, PairCheck] | None = None) -> dict[str, int]:
    """The infill tasks of the kept pairs, per split; each meta.json says `verified` as its pair's does."""
    from kernelwright.synthesis.infill import infill_tasks, write_infill

    counts: dict[str, int] = {}
    for split, tasks in keep.items():
        items = [it for t in tasks for it in infill_tasks(t.id, t.reference, t.solution, t.signature, t.family)]
        verified = {t.id: bool(pair_meta(t, (checks or {}).get(t.id), {})["verified"]) for t in tasks}
        write_infill(items, folder / split, verified)
        counts[split] = len(items)
        counts |= {f"{split}.{k}": v for k, v in Counter(it.kind for it in items).items()}
    return counts


def manifest(cfg: SynthesizeConfig, decon: Decontamination, keep: Mapping[str, Sequence[SynthTask]],
             frame: pl.DataFrame, gpu: bool, provenance: Mapping[str, Any],
             infill: Mapping[str, int]) -> dict[str, Any]:
    return {
        **provenance, "tasks": cfg.tasks, "families": cfg.families or "all", "verified": gpu,
        "verify": "trusted_batch" if gpu else None, "heldout_share": cfg.heldout_share,
        "min_speedup": cfg.min_speedup, "time_share": cfg.time_share,
        "kept": {k: len(v) for k, v in keep.items()},
        "kept_per_family": {s: dict(Counter(t.family for t in v)) for s, v in keep.items()},
        "reasons": dict(Counter(frame["reason"].to_list())),
        "signatures": {s: sorted({t.signature for t in v}) for s, v in keep.items()},
        "decontamination": {"folders": decon.folders, "by_ngram": decon.by_ngram,
                            "by_signature": decon.by_signature, "ngram": cfg.decontam_ngram,
                            "min_share": cfg.decontam_min_share},
        "infill": dict(infill),
    }


def log_synthesize_run(out: Path, cfg: SynthesizeConfig, frame: pl.DataFrame, result: SynthesizeResult,
                       provenance: Mapping[str, Any]) -> None:
    """Params, counts, the speedup plot and the pairs as a dataset input, on the active MLflow run (if any)."""
    import mlflow

    from kernelwright.tracking import log_config

    if mlflow.active_run() is None:
        return
    mlflow.log_params({**provenance, "tasks": cfg.tasks, "families": ",".join(cfg.families) or "all",
                       "verify": "trusted_batch" if result.verified else "none", "heldout_share": cfg.heldout_share,
                       "min_speedup": cfg.min_speedup, "time_share": cfg.time_share})
    log_config(cfg, "synthesize")
    metrics = {"train_kept": result.train_kept, "heldout_kept": result.heldout_kept, "tasks": result.tasks,
               "kept_share": (result.train_kept + result.heldout_kept) / max(result.tasks, 1)}
    metrics |= {f"reason.{k}": v for k, v in result.reasons.items()}
    for family, n in Counter(frame.filter(pl.col("kept"))["family"].to_list()).items():
        metrics[f"kept.{family}"] = n
    metrics |= {f"infill.{k}": v for k, v in result.infill.items()}
    mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
    mlflow.log_artifact(str(out / "manifest.json"))
    mlflow.log_input(mlflow.data.from_polars(frame, source=str(out / "pairs.parquet"),  # type: ignore[attr-defined]
                                             name="synthesized-pairs"), context="synthesize.output")
    speedups = frame.filter(pl.col("speedup").is_not_null())
    if speedups.height:
        from kernelwright.synthesis.plots import speedup_figure

        png = out / "speedup_distribution.png"
        speedup_figure(speedups, png)
        mlflow.log_artifact(str(png))
