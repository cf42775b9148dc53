"""What `kernelwright curate` leaves behind: the files in `out/` and the MLflow run's record.

`write_outputs` writes data.parquet, cuset.json, report.json and weights.html; `log_outputs` and
`log_inputs` log them and the ingested inputs to the active MLflow run, if any. `nothing_left`
does both for a corpus the filters emptied, then stops with the counts (`removal_counts`).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

import mlflow
import polars as pl

from kernelwright import atomic
from kernelwright.config import config_to_params
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.filters import FilterReport
from kernelwright.curation.heatmap import weight_heatmap_html
from kernelwright.curation.heatmap_png import weight_heatmap_png
from kernelwright.errors import UsageError
from kernelwright.tracking import log_config, log_curated_dataset

HEADLINE = ("masked_share", "sensitive_share", "high_share", "masked_share_of_other", "masked_share_of_sensitive",
            "regions", "samples_with_region", "region_token_share", "mean_p", "sample_weight_min",
            "sample_weight_max", "sample_weight_std")
"""The figures that say how much CuSeT acts on this corpus: also logged as params `curate.figure.<name>`."""


def nothing_left(cfg: CurateConfig, out: Path, report: FilterReport,
                 inputs: list[tuple[Path, pl.DataFrame]]) -> NoReturn:
    """Write report.json (the counts that emptied the corpus) and log them, then stop with a
    UsageError that says which filters removed how many."""
    atomic.write_json(out / "report.json", {"filters": report.as_dict(), "stats": {}})
    if mlflow.active_run() is not None:
        mlflow.log_params(config_to_params(cfg, "curate."))
        log_config(cfg, "curate")
        mlflow.log_table(report.table(), artifact_file="curate/filters.json")
        mlflow.log_artifact(str(out / "report.json"), artifact_path="curate")
    log_inputs(inputs)
    raise UsageError(f"nothing left to write: {removal_counts(report, cfg.max_length)}; "
                     f"see {out / 'report.json'}")


def removal_counts(report: FilterReport, max_length: int) -> str:
    """The filters that removed rows, with their counts, in filter order (the report's): '41 did
    not parse, 82 fallback_try_except, ..., 1 longer than max_length=4096'."""
    names = {"too_long": f"longer than max_length={max_length}"}
    parts = [f"{len(report.parse_errors)} did not parse"] if report.parse_errors else []
    parts += [f"{len(ids)} {names.get(reason, reason)}" for reason, ids in report.removed.items() if ids]
    return ", ".join(parts) or "the input holds no rows"


def write_frame(path: Path, frame: pl.DataFrame) -> None:
    """`frame` as Parquet at `path`, atomically."""
    with atomic.atomic_path(path) as tmp:
        frame.write_parquet(tmp)


def write_outputs(out: Path, data: pl.DataFrame, cfg: CurateConfig, report: FilterReport,
                  stats: dict[str, Any], base: Path, decode: Any) -> None:
    """data.parquet, cuset.json (the constants), report.json (filter counts, stats) and weights.html."""
    write_frame(out / "data.parquet", data)
    atomic.write_json(out / "cuset.json", asdict(cfg.cuset()))
    atomic.write_json(out / "report.json", {"filters": report.as_dict(), "stats": stats, "base_model": str(base)})
    atomic.write_text(out / "weights.html", weight_heatmap_html(data.head(4), decode))
    if data.height:
        weight_heatmap_png(data.row(0, named=True), decode, out / "weights.png")


def log_outputs(cfg: CurateConfig, out: Path, data: pl.DataFrame, report: FilterReport,
                stats: dict[str, Any], base: Path) -> None:
    """The config, stats and filter counts, the curated dataset and `out/`, to the active MLflow run."""
    if mlflow.active_run() is None:
        return
    mlflow.log_params({**config_to_params(cfg, "curate."), "curate.base_model_path": str(base)})
    log_config(cfg, "curate")
    mlflow.log_params({f"curate.figure.{k}": f"{float(stats[k]):.6g}" for k in HEADLINE if k in stats})
    mlflow.log_metrics({f"curate.{k}": float(v) for k, v in stats.items()})
    mlflow.log_metrics({f"curate.removed.{k}": float(len(v)) for k, v in report.removed.items()})
    mlflow.log_metrics({f"curate.flagged.{k}": float(len(v)) for k, v in report.flagged.items()})
    mlflow.log_metrics({"curate.input_rows": float(report.input_rows), "curate.kept": float(report.kept),
                        "curate.parse_errors": float(len(report.parse_errors))})
    mlflow.log_table(report.table(), artifact_file="curate/filters.json")
    log_curated_dataset(out / "data.parquet", context="curate.output")
    mlflow.log_artifacts(str(out), artifact_path="curate")


def log_inputs(inputs: list[tuple[Path, pl.DataFrame]]) -> None:
    """Each input, as ingested, as an MLflow dataset (its digest identifies the data)."""
    if mlflow.active_run() is None:
        return
    for path, frame in inputs:
        dataset = mlflow.data.from_polars(  # type: ignore[attr-defined]
            frame, source=path.resolve().as_uri(), name=path.name)
        mlflow.log_input(dataset, context="curate.input")
