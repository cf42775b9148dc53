"""The curate stage: corpus -> filtered, tokenised samples with CuSeT weights, as Parquet.

    kernelwright curate                       # bundled seed corpus, train split, tiny base model
    kernelwright curate --base-model PATH --out DIR
    kernelwright curate --input corpus.jsonl [--input PATH ...] [--map prompt=ref_code,completion=custom_code] \
        [--decontaminate-against EVAL_DIR ...] [--base-model PATH] --out DIR

With `--input`, the inputs are read and normalised by `ingest` (written to `DIR/ingested.parquet`,
parse failures included) and filtered by `filters` (`--decontaminate-against` folders feed the
`contaminated` filter, on the reference and the solution file: an infill row's answer spliced into
its partial). `--input <synthesize out>/infill/train` takes infill tasks as rows (`task_kind` infill).

Output `DIR/data.parquet`, one row per sample: id, task_id, category, source, task_kind ("solution"
or "infill") and region_kind (an infill row's), input_ids, labels (-100 on the prompt),
token_weights (m_t * a_t), loss_mask (m_t), sample_weight, and the diagnostics p, sensitive,
span_kind, region_id; `DIR/cuset.json` holds the constants, `DIR/report.json` the filter counts.

Samples are built, scored and weighted in `samples` (c_t in `sensitive`); `outputs` writes `DIR/`
and logs to MLflow.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import polars as pl
from rich.progress import Progress

from kernelwright import jsontext
from kernelwright.base_model.choose import check_base_model, resolve_base_model
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.filters import FilterReport, run_filters
from kernelwright.curation.ingest import infill_meta, ingest, parse_map, unique_ids
from kernelwright.curation.outputs import log_inputs, log_outputs, nothing_left, write_frame, write_outputs
from kernelwright.curation.samples import curate_samples, samples_of, seed_corpus
from kernelwright.decontaminate import build_index, contaminated
from kernelwright.errors import UsageError
from kernelwright.infill_format import splice
from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.prompting import extract_code
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)


def _contamination(cfg: CurateConfig, corpus: pl.DataFrame) -> dict[str, str]:
    """id -> matched problems, for every row of the corpus (parse failures too: their prompt may match)."""
    if not cfg.decontaminate_against:
        return {}
    index = build_index(cfg.decontaminate_against, cfg.decontam_ngram)
    texts = {r["id"]: [t for t in (r["prompt"], r["completion"] and _solution_text(r)) if t]
             for r in corpus.iter_rows(named=True)}
    return contaminated(index, texts, cfg.decontam_min_share)


def _solution_text(row: dict) -> str:
    """The solution file of an ingested row: its fenced completion, or an infill answer spliced into its partial."""
    infill = infill_meta(row["meta"])
    return splice(infill[1], row["completion"]) if infill else extract_code(row["completion"])


def check_curate_config(cfg: CurateConfig) -> None:
    """Refuse missing inputs, decontamination folders or base model before any store is touched."""
    for path in cfg.input:
        if not Path(path).exists():
            raise UsageError(f"input not found: {path}")
    for folder in cfg.decontaminate_against:
        if not Path(folder).is_dir():
            raise UsageError(f"--decontaminate-against: folder not found: {folder}")
    check_base_model(cfg.base_model)


def unverified_ids(corpus: pl.DataFrame) -> list[str]:
    """Ids of rows whose meta says `verified: false` (pairs written without a GPU check)."""
    out = []
    for row_id, meta in zip(corpus["id"].to_list(), corpus["meta"].to_list(), strict=True):
        try:
            data = jsontext.loads(meta) if meta else {}
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and data.get("verified") is False:
            out.append(str(row_id))
    return out


def check_verified(corpus: pl.DataFrame, allow: bool) -> None:
    """Refuse unverified pairs unless `allow` (then keep them, with a warning)."""
    ids = unverified_ids(corpus)
    if not ids:
        return
    what = f"{len(ids)} pair(s) were never verified on a GPU (e.g. {', '.join(ids[:3])})"
    if not allow:
        raise UsageError(f"{what}: verify them (`kernelwright synthesize` on a GPU host) or pass --allow-unverified")
    log.warning("%s: kept (--allow-unverified)", what)


def run_curate(cfg: CurateConfig) -> Path:
    """Ingest (or take the seed corpus), filter, score and weight; write `out/` and log the run to
    MLflow (inside the active run, if any). When no sample is left, report.json is still written."""
    workdir = resolve_workdir(cfg.workdir)
    out = Path(cfg.out) if cfg.out else workdir / "curated"
    inputs: list[tuple[Path, pl.DataFrame]] = []
    if cfg.input:
        corpus, inputs = ingest(cfg.input, parse_map(cfg.map))
        check_verified(corpus, cfg.allow_unverified)
        if cfg.with_seed_split:
            corpus = unique_ids(pl.concat([corpus, seed_corpus(cfg.split)]))
        write_frame(out / "ingested.parquet", corpus)
    else:
        corpus = seed_corpus(cfg.split)
    errors = corpus.filter(pl.col("parse_error").is_not_null())
    report = FilterReport(input_rows=corpus.height, parse_errors=dict(zip(errors["id"], errors["parse_error"],
                                                                          strict=True)))
    flagged = _contamination(cfg, corpus)
    report.flag("contaminated", flagged)
    kept, report = run_filters(samples_of(corpus), cfg.filters(workdir), flagged, report)
    if not kept:
        nothing_left(cfg, out, report, inputs)
    base = resolve_base_model(cfg.base_model, workdir)
    tokenizer = load_tokenizer(base)
    model = load_base_model(base).eval()
    try:
        with Progress() as progress:
            data, stats = curate_samples(kept, tokenizer, model, cfg, progress, report)
    except UsageError:
        if report.kept > 0:
            raise
        nothing_left(cfg, out, report, inputs)
    write_outputs(out, data, cfg, report, stats, base, tokenizer.decode)
    log_outputs(cfg, out, data, report, stats, base)
    log_inputs(inputs)
    return out
