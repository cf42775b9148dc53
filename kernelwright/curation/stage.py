"""The curate stage: corpus -> filtered, tokenised samples with CuSeT weights, as Parquet.

    kernelwright curate                       # bundled seed corpus, train split, tiny base model
    kernelwright curate --base-model PATH --out DIR
    kernelwright curate --input corpus.jsonl [--input PATH ...] [--map prompt=ref_code,completion=custom_code] \
        [--decontaminate-against EVAL_DIR ...] [--base-model PATH] --out DIR

With `--input`, the inputs are read and normalised by `ingest` (written to `DIR/ingested.parquet`,
parse failures included) and filtered by `filters` (`--decontaminate-against` folders feed the
`contaminated` filter).

Output `DIR/data.parquet`, one row per sample: input_ids, labels (-100 on the prompt),
token_weights (m_t * a_t), loss_mask (m_t), sample_weight, and the diagnostics p, sensitive,
span_kind, region_id; `DIR/cuset.json` holds the constants, `DIR/report.json` the filter counts.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import mlflow
import polars as pl
from rich.progress import Progress
from transformers import PreTrainedTokenizerBase

from kernelwright import atomic
from kernelwright.config import config_to_params
from kernelwright.cuda.nvrtc import DEFAULT_ARCH
from kernelwright.cuda.spans import completion_spans
from kernelwright.curation.confidence import ConfidenceScorer, model_fingerprint, score_chunked
from kernelwright.curation.filters import FilterReport, FilterSettings, run_filters
from kernelwright.curation.heatmap import weight_heatmap_html
from kernelwright.curation.ingest import FIELDS, ingest, parse_map
from kernelwright.curation.weights import (
    KEY_BASE,
    CusetParams,
    sample_key,
    sample_weights,
    sorted_by_sample_pos,
    token_weights,
)
from kernelwright.decontaminate import build_index, contaminated
from kernelwright.errors import UsageError
from kernelwright.models import check_base_model, load_base_model, load_tokenizer, resolve_base_model
from kernelwright.prompting import completion_text, extract_code, prompt_messages
from kernelwright.seed import SeedTask, load_seed_tasks, split_tasks
from kernelwright.tracking import log_curated_dataset
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)


@dataclass
class CurateConfig:
    """Config of `kernelwright curate`."""

    input: list[str] = field(
        default_factory=list,
        metadata={"help": "Corpus to ingest (JSONL, JSON, Parquet, CSV, a save_to_disk folder, a seed or "
                          "KernelBench-style folder); repeatable. Empty: the bundled seed corpus.",
                  "action": "extend"},
    )
    map: list[str] = field(
        default_factory=list,
        metadata={"help": f"FIELD=COLUMN pairs, comma-separated (fields: {', '.join(FIELDS)}), e.g. "
                          "prompt=ref_code,completion=custom_code. Unmapped fields try common column names.",
                  "action": "extend"},
    )
    decontaminate_against: list[str] = field(
        default_factory=list,
        metadata={"help": "Evaluation problem folders (every *.py below); samples overlapping one are removed "
                          "as contaminated; repeatable. Empty: off.", "action": "extend"},
    )
    decontam_ngram: int = field(
        default=13, metadata={"help": "Decontamination n-gram length, in normalised code tokens."}
    )
    decontam_min_share: float = field(
        default=0.5,
        metadata={"help": "A sample is contaminated when more than this share of a problem's distinct n-grams "
                          "occur in its prompt + completion (0: any shared n-gram)."},
    )
    near_dup_threshold: float = field(
        default=0.85,
        metadata={"help": "Near duplicate at or above this Jaccard similarity of code shingles (0: off)."},
    )
    near_dup_shingle: int = field(default=5, metadata={"help": "Near-duplicate shingle length, in code tokens."})
    near_dup_num_perm: int = field(
        default=128, metadata={"help": "MinHash permutations (LSH accuracy knob; at least 32)."}
    )
    nvrtc: bool = field(
        default=True, metadata={"help": "NVRTC-compile each sample's device code on the CPU; false: skip."}
    )
    nvrtc_arch: str = field(default=DEFAULT_ARCH, metadata={"help": "NVRTC --gpu-architecture."})
    torch_compute_filter: bool = field(default=True, metadata={
        "help": "Remove samples whose C++/CUDA host code calls PyTorch compute (at::matmul, x.sum(), ...); "
                "false: keep them."})
    workers: int = field(default=0, metadata={"help": "Processes for NVRTC compiles. 0: one per CPU core."})
    split: str = field(
        default="train",
        metadata={"help": "Seed corpus split to curate: train, test (held-out tasks) or all."},
    )
    base_model: str | None = field(
        default=None,
        metadata={"help": "Local HF checkpoint that scores p_t and tokenises. None: the tiny local model."},
    )
    out: str | None = field(default=None, metadata={"help": "Output folder. None: <workdir>/curated."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    max_length: int = field(
        default=4096, metadata={"help": "Samples longer than this many tokens (prompt + completion) are dropped."}
    )
    batch_tokens: int = field(
        default=16384, metadata={"help": "Padded tokens per confidence-scoring batch (memory knob)."}
    )
    chunk_samples: int = field(
        default=512, metadata={"help": "Samples per resumable p_t chunk (one Parquet part each; reused on rerun)."}
    )
    p_cache: str | None = field(
        default=None, metadata={"help": "Folder of the p_t chunk parts. None: <workdir>/cache/p_t."}
    )
    tau_high: float = field(default=0.9, metadata={"help": "p_t at or above this is high confidence."})
    tau_low: float = field(default=0.5, metadata={"help": "p_t below this is low confidence."})
    region_gap: int = field(default=2, metadata={"help": "Low-confidence sensitive runs this many tokens apart merge."})
    rho_max: float = field(
        default=0.5,
        metadata={"help": "Masked share of confident boilerplate = rho_max * share of high tokens; 0: off."},
    )
    alpha: float = field(default=1.0, metadata={"help": "Weight of sensitive high-confidence tokens (1: neutral)."})
    region_lambda: float = field(default=1.0, metadata={"help": "Strength of region-aware sample weighting; 0: off."})
    w_min: float = field(default=0.5, metadata={"help": "Lower clip of the sample weight before renormalising."})
    w_max: float = field(default=3.0, metadata={"help": "Upper clip of the sample weight before renormalising."})

    def __post_init__(self) -> None:
        if self.split not in ("train", "test", "all"):
            raise ValueError(f"split must be train, test or all, not {self.split!r}")
        if not 0.0 <= self.tau_low <= self.tau_high <= 1.0:
            raise ValueError("need 0 <= tau_low <= tau_high <= 1")
        if self.w_min > self.w_max:
            raise ValueError("need w_min <= w_max")
        if not 0.0 <= self.near_dup_threshold <= 1.0:
            raise ValueError("near_dup_threshold is a Jaccard similarity in [0, 1] (0: off)")
        if not 0.0 <= self.decontam_min_share < 1.0:
            raise ValueError("decontam_min_share must be in [0, 1)")
        if min(self.decontam_ngram, self.near_dup_shingle) < 1 or self.near_dup_num_perm < 32 or self.workers < 0:
            raise ValueError("need decontam_ngram >= 1, near_dup_shingle >= 1, near_dup_num_perm >= 32, workers >= 0")

    def cuset(self) -> CusetParams:
        return CusetParams(
            tau_high=self.tau_high, tau_low=self.tau_low, region_gap=self.region_gap, rho_max=self.rho_max,
            alpha=self.alpha, lam=self.region_lambda, w_min=self.w_min, w_max=self.w_max,
        )

    def filters(self, workdir: Path) -> FilterSettings:
        return FilterSettings(
            near_dup_threshold=self.near_dup_threshold or 2.0, shingle=self.near_dup_shingle,
            num_perm=self.near_dup_num_perm, nvrtc=self.nvrtc, nvrtc_arch=self.nvrtc_arch,
            workers=self.workers or os.cpu_count() or 1, cache_dir=workdir / "cache" / "nvrtc",
            torch_compute_filter=self.torch_compute_filter,
        )


@dataclass(frozen=True)
class Sample:
    id: str
    task_id: str
    category: str
    source: str
    prompt: str  # the PyTorch reference
    completion: str  # the assistant's answer text (fenced solution file)


def seed_samples(split: str) -> list[Sample]:
    tasks = load_seed_tasks()
    train, test = split_tasks(tasks)
    chosen: list[SeedTask] = {"train": train, "test": test, "all": tasks}[split]
    return [
        Sample(id=f"seed/{t.id}", task_id=t.id, category=t.category, source="kernelwright-seed",
               prompt=t.reference, completion=completion_text(t.solution))
        for t in chosen
    ]


def tokenize_sample(tokenizer: PreTrainedTokenizerBase, sample: Sample) -> dict[str, Any]:
    """Token ids exactly as training sees them, plus completion token character offsets.

    The prompt is the chat template with the generation prompt; the completion is the rest of
    the rendered conversation (the answer and the template's end-of-turn tokens).
    """
    messages = prompt_messages(sample.prompt)
    prompt_text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(
        [*messages, {"role": "assistant", "content": sample.completion}], tokenize=False
    )
    assert isinstance(prompt_text, str) and isinstance(full, str)
    if not full.startswith(prompt_text + sample.completion):
        raise UsageError("the tokenizer's chat template does not put the answer after the generation prompt")
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    comp = tokenizer(full[len(prompt_text):], add_special_tokens=False, return_offsets_mapping=True)
    return {
        "prompt_ids": list(prompt_ids),
        "completion_ids": list(comp["input_ids"]),
        "offsets": [tuple(o) for o in comp["offset_mapping"]],
    }


def _token_frame(tokenized: list[dict[str, Any]], probs: list[list[float]]) -> pl.DataFrame:
    samples, pos, completion, p, start, end = [], [], [], [], [], []
    for s, (tok, ps) in enumerate(zip(tokenized, probs, strict=True)):
        n_prompt = len(tok["prompt_ids"])
        n = n_prompt + len(tok["completion_ids"])
        samples += [s] * n
        pos += list(range(n))
        completion += [False] * n_prompt + [True] * (n - n_prompt)
        p += [None if (i < n_prompt or math.isnan(v)) else v for i, v in enumerate(ps)]
        start += [None] * n_prompt + [o[0] for o in tok["offsets"]]
        end += [None] * n_prompt + [o[1] for o in tok["offsets"]]
    return pl.DataFrame(
        {"sample": samples, "pos": pos, "completion": completion, "p": p, "tok_start": start, "tok_end": end},
        schema={"sample": pl.Int64, "pos": pl.Int64, "completion": pl.Boolean, "p": pl.Float64,
                "tok_start": pl.Int64, "tok_end": pl.Int64},
    )


def _span_frame(samples: list[Sample]) -> tuple[pl.DataFrame, dict[str, int]]:
    rows: dict[str, list] = {"sample": [], "s_start": [], "s_end": [], "kind": []}
    stats = {"cuda_strings": 0, "strings_skipped": 0, "macros_parsed": 0, "macros_unparsed": 0}
    for i, s in enumerate(samples):
        res = completion_spans(s.completion)
        for key in stats:
            stats[key] += getattr(res, key)
        for sp in res.spans:
            rows["sample"].append(i)
            rows["s_start"].append(sp.start)
            rows["s_end"].append(sp.end)
            rows["kind"].append(sp.kind)
    frame = pl.DataFrame(rows, schema={"sample": pl.Int64, "s_start": pl.Int64, "s_end": pl.Int64, "kind": pl.Utf8})
    return frame, stats


def mark_sensitive(tokens: pl.LazyFrame, spans: pl.LazyFrame, *, in_order: bool = False) -> pl.LazyFrame:
    """c_t and span_kind: a token is sensitive where its characters overlap a span.

    Where spans nest, the token takes the kind of the innermost (shortest) span; equal lengths:
    the earlier span, then the kind's name. Rows come back sorted by (sample, pos). `in_order`:
    they already come in that order (`_token_frame` builds them so), so they are not checked.

    Within a sample, token offsets grow with pos, so the tokens a span [s, e) overlaps are one run
    of rows (`_span_runs`); `_innermost` picks each row's span. No join and no group-by.
    """
    t = sorted_by_sample_pos(tokens.collect(), in_order=in_order)
    best, kinds = _innermost(_span_runs(_row_keys(t), spans.collect()), t.height)
    return t.with_columns(kinds.gather(best).alias("span_kind"), c=best.is_not_null()).lazy()


def _row_keys(t: pl.DataFrame) -> pl.DataFrame:
    """Per row sample * KEY_BASE + tok_end (_e) and + tok_start (_s), prompt rows without offsets
    at -1; one lazy select, the two side by side."""
    return t.lazy().select(
        _e=sample_key(pl.col("tok_end").fill_null(-1)),
        _s=sample_key(pl.col("tok_start").fill_null(-1)),
    ).collect()


def _span_runs(keys: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """`spans` with the run of rows [_lo, _hi) each overlaps; spans that overlap no token dropped.

    A run goes from the first row with tok_end > s to the first with tok_start >= e: two binary
    searches in the rows' keys (`_row_keys`), evaluated side by side. Runs come back in the order
    of their first rows.
    """
    start = sample_key(pl.col("s_start"))
    return spans.sort(start).with_columns(  # queries in order: the searches stay in cache
        _lo=pl.lit(keys["_e"]).search_sorted(start, side="right"),
        _hi=pl.lit(keys["_s"]).search_sorted(sample_key(pl.col("s_end")), side="left"),
    ).filter(pl.col("_lo") < pl.col("_hi"))


def _innermost(runs: pl.DataFrame, n_rows: int) -> tuple[pl.Series, pl.Series]:
    """(best, kinds): per row the place in `kinds` of its innermost span (null: in none), and the
    spans' kinds innermost first (length, start, kind).

    The runs are painted onto the rows outermost first, each (row, span) pair one write of the
    span's place: a row ends up holding its innermost span's. One expansion and one scatter, no
    sort of the pairs. It rests on `Series.scatter` writing repeated indices in order (the last
    write stays), which tests/curation/test_stage.py checks on the installed Polars.
    """
    length = pl.col("s_end") - pl.col("s_start")
    order = runs.select(pl.arg_sort_by(length * KEY_BASE + pl.col("s_start"), "kind")).to_series()
    outer_first = runs.select("_lo", "_hi")[order.reverse()].with_columns(
        _o=pl.int_range(pl.len(), 0, -1, dtype=pl.UInt32) - 1)  # place in `kinds`: len - 1 down to 0
    pairs = outer_first.select(_g=pl.int_ranges("_lo", "_hi", dtype=pl.UInt32), _o="_o").explode("_g")
    # null, not a sentinel one past the kinds, where a row is in no span: `kinds` stays one chunk
    # (a gather from several is ~2x slower) and c is the null mask
    best = pl.Series("_o", [], dtype=pl.UInt32).extend_constant(None, n_rows).scatter(pairs["_g"], pairs["_o"])
    return best, runs["kind"].gather(order)


def assemble(tokens: pl.DataFrame, per_sample: pl.DataFrame, samples: list[Sample],
             tokenized: list[dict[str, Any]]) -> pl.DataFrame:
    """One row per sample with list columns in token order: what training reads as is.

    `tokens` is `token_weights`' result, whose rows come in (sample, pos) order.
    """
    lists = tokens.group_by("sample", maintain_order=True).agg(
        token_weights=pl.col("token_weight"),
        loss_mask=pl.col("loss_mask").cast(pl.Int8),
        p=pl.col("p").cast(pl.Float32),
        sensitive=pl.col("c"),
        span_kind=pl.col("span_kind"),
        region_id=pl.col("region_id"),
    )
    meta = pl.DataFrame({
        "sample": list(range(len(samples))),
        "id": [s.id for s in samples],
        "task_id": [s.task_id for s in samples],
        "category": [s.category for s in samples],
        "source": [s.source for s in samples],
        "input_ids": [t["prompt_ids"] + t["completion_ids"] for t in tokenized],
        "labels": [[-100] * len(t["prompt_ids"]) + t["completion_ids"] for t in tokenized],
        "prompt_len": [len(t["prompt_ids"]) for t in tokenized],
    })
    return (
        meta.join(lists, on="sample").join(per_sample.select("sample", "sample_weight", "R", "mask_share"), on="sample")
        .sort("sample").drop("sample")
    )


def curate_samples(samples: list[Sample], tokenizer: PreTrainedTokenizerBase, model: Any,
                   cfg: CurateConfig, progress: Progress | None = None,
                   report: FilterReport | None = None) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Tokenise, drop samples over `cfg.max_length` (before scoring them, and before the sample
    weights are normalised over the corpus), then score and weight the rest."""
    tokenized = [tokenize_sample(tokenizer, s) for s in samples]
    lengths = [len(t["prompt_ids"]) + len(t["completion_ids"]) for t in tokenized]
    fits = [n <= cfg.max_length for n in lengths]
    if report is not None:
        long = {s.id: f"{n} tokens > max_length {cfg.max_length}" for s, n in zip(samples, lengths, strict=True)
                if n > cfg.max_length}
        report.remove("too_long", list(long), long)
    samples = [s for s, ok in zip(samples, fits, strict=True) if ok]
    tokenized = [t for t, ok in zip(tokenized, fits, strict=True) if ok]
    if not samples:
        raise UsageError(f"no sample fits max_length={cfg.max_length} tokens; nothing to write")
    sequences = [t["prompt_ids"] + t["completion_ids"] for t in tokenized]
    probs = score_chunked(
        ConfidenceScorer(model, tokenizer.pad_token_id, cfg.batch_tokens), sequences, [s.id for s in samples],
        Path(cfg.p_cache) if cfg.p_cache else resolve_workdir(cfg.workdir) / "cache" / "p_t",
        model_fingerprint(model, tokenizer), cfg.chunk_samples, progress,
    ).probs
    spans, span_stats = _span_frame(samples)
    tokens = mark_sensitive(_token_frame(tokenized, probs).lazy(), spans.lazy(), in_order=True)
    weighted = token_weights(tokens, cfg.cuset(), in_order=True).collect()
    per_sample = sample_weights(weighted.lazy(), cfg.cuset()).collect()
    data = assemble(weighted, per_sample, samples, tokenized)
    comp = weighted.filter(pl.col("completion"))
    stats = {
        **span_stats,
        "samples": len(samples),
        "tokens": weighted.height,
        "completion_tokens": comp.height,
        "sensitive_share": float(comp["c"].mean() or 0.0),
        "masked_share": float(comp["masked"].mean() or 0.0),
        "region_token_share": float(comp["region_id"].is_not_null().mean() or 0.0),
        "mean_p": float(comp["p"].mean() or 0.0),
        "sample_weight_min": float(per_sample["sample_weight"].min() or 0.0),  # type: ignore[arg-type]
        "sample_weight_max": float(per_sample["sample_weight"].max() or 0.0),  # type: ignore[arg-type]
        "samples_with_region": int((per_sample["R"] > 0).sum()),
    }
    return data, stats


def samples_of(corpus: pl.DataFrame) -> list[Sample]:
    """The usable rows of an ingested corpus (no parse error) as samples."""
    ok = corpus.filter(pl.col("parse_error").is_null())
    return [Sample(id=r["id"], task_id=r["task_id"] or r["id"], category=r["category"] or "uncategorised",
                   source=r["source"], prompt=r["prompt"], completion=r["completion"])
            for r in ok.iter_rows(named=True)]


def _seed_corpus(split: str) -> pl.DataFrame:
    rows = [{**{k: getattr(s, k) for k in ("id", "source", "task_id", "category", "prompt", "completion")},
             "license": "Apache-2.0", "meta": "{}", "parse_error": None} for s in seed_samples(split)]
    return pl.DataFrame(rows, schema={**dict.fromkeys(FIELDS, pl.Utf8), "meta": pl.Utf8, "parse_error": pl.Utf8})


def _contamination(cfg: CurateConfig, corpus: pl.DataFrame) -> dict[str, str]:
    """id -> matched problems, for every row of the corpus (parse failures too: their prompt may match)."""
    if not cfg.decontaminate_against:
        return {}
    index = build_index(cfg.decontaminate_against, cfg.decontam_ngram)
    texts = {r["id"]: [t for t in (r["prompt"], r["completion"] and extract_code(r["completion"])) if t]
             for r in corpus.iter_rows(named=True)}
    return contaminated(index, texts, cfg.decontam_min_share)


def check_arguments(cfg: CurateConfig) -> None:
    """Refuse missing inputs, decontamination folders or base model before any store is touched."""
    for path in cfg.input:
        if not Path(path).exists():
            raise UsageError(f"input not found: {path}")
    for folder in cfg.decontaminate_against:
        if not Path(folder).is_dir():
            raise UsageError(f"--decontaminate-against: folder not found: {folder}")
    check_base_model(cfg.base_model)


def run_curate(cfg: CurateConfig) -> Path:
    """Ingest (or take the seed corpus), filter, score and weight; write `out/` and log the run to
    MLflow (inside the active run, if any). When no sample is left, report.json is still written."""
    workdir = resolve_workdir(cfg.workdir)
    out = Path(cfg.out) if cfg.out else workdir / "curated"
    inputs: list[tuple[Path, pl.DataFrame]] = []
    if cfg.input:
        corpus, inputs = ingest(cfg.input, parse_map(cfg.map))
        _write_frame(out / "ingested.parquet", corpus)
    else:
        corpus = _seed_corpus(cfg.split)
    errors = corpus.filter(pl.col("parse_error").is_not_null())
    report = FilterReport(input_rows=corpus.height, parse_errors=dict(zip(errors["id"], errors["parse_error"],
                                                                          strict=True)))
    flagged = _contamination(cfg, corpus)
    report.flag("contaminated", flagged)
    kept, report = run_filters(samples_of(corpus), cfg.filters(workdir), flagged, report)
    if not kept:
        _nothing_left(cfg, out, report, inputs)
    base = resolve_base_model(cfg.base_model, workdir)
    tokenizer = load_tokenizer(base)
    model = load_base_model(base).eval()
    try:
        with Progress() as progress:
            data, stats = curate_samples(kept, tokenizer, model, cfg, progress, report)
    except UsageError:
        if report.kept > 0:
            raise
        _nothing_left(cfg, out, report, inputs)
    _write(out, data, cfg, report, stats, base, tokenizer.decode)
    _log(cfg, out, data, report, stats, base)
    _log_inputs(inputs)
    return out


def _nothing_left(cfg: CurateConfig, out: Path, report: FilterReport,
                  inputs: list[tuple[Path, pl.DataFrame]]) -> NoReturn:
    """Write report.json (the counts that emptied the corpus) and log them, then stop with a
    UsageError that says which filters removed how many."""
    atomic.write_json(out / "report.json", {"filters": report.as_dict(), "stats": {}})
    if mlflow.active_run() is not None:
        mlflow.log_params(config_to_params(cfg, "curate."))
        mlflow.log_table(report.table(), artifact_file="curate/filters.json")
        mlflow.log_artifact(str(out / "report.json"), artifact_path="curate")
    _log_inputs(inputs)
    raise UsageError(f"nothing left to write: {removal_counts(report, cfg.max_length)}; "
                     f"see {out / 'report.json'}")


def removal_counts(report: FilterReport, max_length: int) -> str:
    """The filters that removed rows, with their counts, in filter order (the report's): '41 did
    not parse, 82 fallback_try_except, ..., 1 longer than max_length=4096'."""
    names = {"too_long": f"longer than max_length={max_length}"}
    parts = [f"{len(report.parse_errors)} did not parse"] if report.parse_errors else []
    parts += [f"{len(ids)} {names.get(reason, reason)}" for reason, ids in report.removed.items() if ids]
    return ", ".join(parts) or "the input holds no rows"


def _write_frame(path: Path, frame: pl.DataFrame) -> None:
    with atomic.atomic_path(path) as tmp:
        frame.write_parquet(tmp)


def _write(out: Path, data: pl.DataFrame, cfg: CurateConfig, report: FilterReport,
           stats: dict[str, Any], base: Path, decode: Any) -> None:
    _write_frame(out / "data.parquet", data)
    atomic.write_json(out / "cuset.json", asdict(cfg.cuset()))
    atomic.write_json(out / "report.json", {"filters": report.as_dict(), "stats": stats, "base_model": str(base)})
    atomic.write_text(out / "weights.html", weight_heatmap_html(data.head(4), decode))


def _log(cfg: CurateConfig, out: Path, data: pl.DataFrame, report: FilterReport,
         stats: dict[str, Any], base: Path) -> None:
    if mlflow.active_run() is None:
        return
    mlflow.log_params({**config_to_params(cfg, "curate."), "curate.base_model_path": str(base)})
    mlflow.log_metrics({f"curate.{k}": float(v) for k, v in stats.items()})
    mlflow.log_metrics({f"curate.removed.{k}": float(len(v)) for k, v in report.removed.items()})
    mlflow.log_metrics({f"curate.flagged.{k}": float(len(v)) for k, v in report.flagged.items()})
    mlflow.log_metrics({"curate.input_rows": float(report.input_rows), "curate.kept": float(report.kept),
                        "curate.parse_errors": float(len(report.parse_errors))})
    mlflow.log_table(report.table(), artifact_file="curate/filters.json")
    log_curated_dataset(out / "data.parquet", context="curate.output")
    mlflow.log_artifacts(str(out), artifact_path="curate")


def _log_inputs(inputs: list[tuple[Path, pl.DataFrame]]) -> None:
    """Each input, as ingested, as an MLflow dataset (its digest identifies the data)."""
    if mlflow.active_run() is None:
        return
    for path, frame in inputs:
        dataset = mlflow.data.from_polars(  # type: ignore[attr-defined]
            frame, source=path.resolve().as_uri(), name=path.name)
        mlflow.log_input(dataset, context="curate.input")
