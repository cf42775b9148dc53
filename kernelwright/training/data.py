"""Curated data as training reads it: `data.parquet` checked, loaded and trimmed to what can be learnt."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset

from kernelwright import jsontext
from kernelwright.errors import UsageError
from kernelwright.training.cuset_trainer import WEIGHT_COLUMNS

log = logging.getLogger(__name__)


def check_curated(data_dir: Path) -> Path:
    """`data_dir/data.parquet`, checked (from its schema alone) to hold what `kernelwright curate` writes."""
    path = data_dir / "data.parquet"
    if not path.is_file():
        raise UsageError(f"{data_dir} holds no curated data (no data.parquet): make it with `kernelwright curate "
                         f"--out {data_dir}`, or pass --data with a folder that curate wrote")
    try:
        columns = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"{path} is not a Parquet file ({exc}): remake it with `kernelwright curate`") from None
    missing = [c for c in ("input_ids", "labels", *WEIGHT_COLUMNS) if c not in columns]
    if missing:
        raise UsageError(f"{path} lacks column(s) {', '.join(missing)}: it was not written by `kernelwright curate`")
    return path


def load_curated(data_dir: Path) -> tuple[Dataset, dict[str, Any]]:
    ds = Dataset.from_parquet(str(check_curated(data_dir)))
    assert isinstance(ds, Dataset)
    cuset_file = data_dir / "cuset.json"
    cuset: Any = {}
    if cuset_file.is_file():
        try:
            cuset = jsontext.loads(cuset_file.read_bytes())
        except ValueError as exc:
            raise UsageError(f"{cuset_file} is not the JSON `kernelwright curate` writes: {exc}") from None
    if not isinstance(cuset, dict):
        raise UsageError(f"{cuset_file} is not the JSON object `kernelwright curate` writes")
    return ds.select_columns(["input_ids", "labels", *WEIGHT_COLUMNS]), cuset


def drop_unlearnable(dataset: Dataset, max_length: int | None) -> Dataset:
    """Drop samples whose completion lies wholly past `max_length` (they would train on nothing)."""
    keep = dataset.filter(lambda e: any(label != -100 for label in e["labels"][:max_length]))
    if len(keep) == 0:
        raise UsageError(f"max_length={max_length} cuts off every completion: no sample has a token to learn from")
    if len(keep) < len(dataset):
        log.warning("max_length=%s cuts off the whole completion of %d of %d samples: dropped",
                    max_length, len(dataset) - len(keep), len(dataset))
    return keep
