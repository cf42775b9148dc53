"""The corpus as samples, and samples as training rows: tokenised, p_t-scored, marked and weighted.

`seed_corpus` and `samples_of` turn the bundled seed tasks or an ingested corpus into `Sample`s;
an infill row (BiC-RL's first phase as SFT data) keeps its region kind and partial solution, its
prompt is `infill_format.infill_messages` and its completion the fenced CUDA answer, whose spans
are parsed as raw CUDA in the source around the marker (`infill_spans`).
`curate_samples` tokenises them as training will, scores p_t with the base model (in resumable
chunks), marks the CUDA-critical tokens (`sensitive`), weights them (`weights`) and assembles one
row per sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from rich.progress import Progress
from transformers import PreTrainedTokenizerBase

from kernelwright.cuda.spans import Span, SpanResult, completion_spans, cuda_spans, cuda_string_literals
from kernelwright.curation.confidence import ConfidenceScorer, model_fingerprint, score_chunked
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.filters import FilterReport
from kernelwright.curation.free_choices import common_names, free_tokens
from kernelwright.curation.ingest import FIELDS, infill_meta
from kernelwright.curation.sensitive import mark_sensitive
from kernelwright.curation.weights import sample_weights, token_weights
from kernelwright.errors import UsageError
from kernelwright.infill_format import MARKER_RE, completion_code, infill_messages
from kernelwright.prompting import completion_text, prompt_messages
from kernelwright.seed import SeedTask, load_seed_tasks, split_tasks
from kernelwright.workdir import resolve_workdir


@dataclass(frozen=True)
class Sample:
    id: str
    task_id: str
    category: str
    source: str
    prompt: str  # the PyTorch reference
    completion: str  # the assistant's answer text (fenced solution file; an infill row's: the fenced CUDA answer)
    region_kind: str | None = None  # an infill row's hidden region kind; None: a whole-file pair
    partial: str | None = None  # an infill row's solution with the region replaced by the marker

    @property
    def task_kind(self) -> str:
        return "solution" if self.partial is None else "infill"


def seed_samples(split: str) -> list[Sample]:
    tasks = load_seed_tasks()
    train, test = split_tasks(tasks)
    chosen: list[SeedTask] = {"train": train, "test": test, "all": tasks}[split]
    return [
        Sample(id=f"seed/{t.id}", task_id=t.id, category=t.category, source="kernelwright-seed",
               prompt=t.reference, completion=completion_text(t.solution))
        for t in chosen
    ]


def samples_of(corpus: pl.DataFrame) -> list[Sample]:
    """The usable rows of an ingested corpus (no parse error) as samples."""
    ok = corpus.filter(pl.col("parse_error").is_null())
    out = []
    for r in ok.iter_rows(named=True):
        kind, partial = infill_meta(r["meta"]) or (None, None)
        out.append(Sample(id=r["id"], task_id=r["task_id"] or r["id"], category=r["category"] or "uncategorised",
                          source=r["source"], prompt=r["prompt"], completion=r["completion"], region_kind=kind,
                          partial=partial))
    return out


def seed_corpus(split: str) -> pl.DataFrame:
    """The bundled seed corpus's `split` as an ingested corpus (same columns, no parse errors)."""
    rows = [{**{k: getattr(s, k) for k in ("id", "source", "task_id", "category", "prompt", "completion")},
             "license": "Apache-2.0", "meta": "{}", "parse_error": None} for s in seed_samples(split)]
    return pl.DataFrame(rows, schema={**dict.fromkeys(FIELDS, pl.Utf8), "meta": pl.Utf8, "parse_error": pl.Utf8})


def sample_messages(sample: Sample) -> list[dict[str, str]]:
    """The chat prompt of a sample: the reference (`prompt_messages`), or an infill row's reference and
    partial solution (`infill_messages`)."""
    if sample.partial is not None and sample.region_kind is not None:
        return infill_messages(sample.prompt, sample.partial, sample.region_kind)
    return prompt_messages(sample.prompt)


def infill_spans(partial: str, completion: str) -> SpanResult:
    """CUDA-critical spans of an infill completion, in its character offsets: the answer inside the fence
    is parsed as raw CUDA (`cuda_spans`), between the CUDA source before and after the marker when the
    marker sits in a CUDA string of `partial` (the kernel around it gives bounds guards and pointer accesses)."""
    code = completion_code(completion)
    fence = completion.find("```")
    at = completion.find(code, fence + 3 if fence >= 0 else 0)
    marker = MARKER_RE.search(partial)
    if not code or at < 0 or marker is None:
        return SpanResult()
    spliced = partial[:marker.start()] + code + partial[marker.end():]
    lo, hi = marker.start(), marker.start() + len(code)
    around = next(((text[:lo - off], text[hi - off:]) for off, text in cuda_string_literals(spliced, SpanResult())
                   if off <= lo and hi <= off + len(text)), ("", ""))
    result = cuda_spans(code, *around)
    result.spans = [Span(s.start + at, s.end + at, s.kind) for s in result.spans]
    return result


def tokenize_sample(tokenizer: PreTrainedTokenizerBase, sample: Sample,
                    common: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Token ids exactly as training sees them, plus completion token character offsets.

    The prompt is the chat template with the generation prompt; the completion is the rest of
    the rendered conversation (the answer and the template's end-of-turn tokens).
    """
    messages = sample_messages(sample)
    prompt_text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(
        [*messages, {"role": "assistant", "content": sample.completion}], tokenize=False
    )
    assert isinstance(prompt_text, str) and isinstance(full, str)
    if not full.startswith(prompt_text + sample.completion):
        raise UsageError("the tokenizer's chat template does not put the answer after the generation prompt")
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    completion = full[len(prompt_text):]
    comp = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
    offsets = [tuple(o) for o in comp["offset_mapping"]]
    return {
        "prompt_ids": list(prompt_ids),
        "completion_ids": list(comp["input_ids"]),
        "offsets": offsets,
        "free": free_tokens(prompt_text, completion, offsets, common),  # reading B's candidates (free_choices)
    }


def _token_frame(tokenized: list[dict[str, Any]], probs: list[list[float]]) -> pl.DataFrame:
    samples, pos, completion, p, start, end, free = [], [], [], [], [], [], []
    for s, (tok, ps) in enumerate(zip(tokenized, probs, strict=True)):
        n_prompt = len(tok["prompt_ids"])
        n = n_prompt + len(tok["completion_ids"])
        samples += [s] * n
        pos += list(range(n))
        completion += [False] * n_prompt + [True] * (n - n_prompt)
        p += [None if (i < n_prompt or math.isnan(v)) else v for i, v in enumerate(ps)]
        start += [None] * n_prompt + [o[0] for o in tok["offsets"]]
        end += [None] * n_prompt + [o[1] for o in tok["offsets"]]
        free += [False] * n_prompt + list(tok["free"])
    return pl.DataFrame(
        {"sample": samples, "pos": pos, "completion": completion, "p": p, "tok_start": start, "tok_end": end,
         "free": free},
        schema={"sample": pl.Int64, "pos": pl.Int64, "completion": pl.Boolean, "p": pl.Float64,
                "tok_start": pl.Int64, "tok_end": pl.Int64, "free": pl.Boolean},
    )


def _span_frame(samples: list[Sample]) -> tuple[pl.DataFrame, dict[str, int]]:
    rows: dict[str, list] = {"sample": [], "s_start": [], "s_end": [], "kind": []}
    stats = {"cuda_strings": 0, "strings_skipped": 0, "macros_parsed": 0, "macros_unparsed": 0}
    for i, s in enumerate(samples):
        res = completion_spans(s.completion) if s.partial is None else infill_spans(s.partial, s.completion)
        for key in stats:
            stats[key] += getattr(res, key)
        for sp in res.spans:
            rows["sample"].append(i)
            rows["s_start"].append(sp.start)
            rows["s_end"].append(sp.end)
            rows["kind"].append(sp.kind)
    frame = pl.DataFrame(rows, schema={"sample": pl.Int64, "s_start": pl.Int64, "s_end": pl.Int64, "kind": pl.Utf8})
    return frame, stats


def assemble(tokens: pl.DataFrame, per_sample: pl.DataFrame, samples: list[Sample],
             tokenized: list[dict[str, Any]]) -> pl.DataFrame:
    """One row per sample with list columns in token order: what training reads as is.

    `tokens` is `token_weights`' result, whose rows come in (sample, pos) order.
    """
    lists = tokens.group_by("sample", maintain_order=True).agg(
        token_weights=pl.col("token_weight"),
        loss_mask=pl.col("loss_mask"),  # m_t, Float32: 1 kept, mask_floor masked
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
        "task_kind": [s.task_kind for s in samples],  # "solution" or "infill"
        "region_kind": pl.Series([s.region_kind for s in samples], dtype=pl.Utf8),
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
    common = common_names(s.completion for s in samples)
    tokenized = [tokenize_sample(tokenizer, s, common) for s in samples]
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
        # which end of the confidence scale the mask took (low under mask_target=uncertain)
        "masked_mean_p": float(comp.filter(pl.col("masked"))["p"].mean() or 0.0),  # type: ignore[arg-type]
        # reading B's guard: low-confidence, non-sensitive tokens kept as no free choice (syntax, a name's later use)
        "fixed_kept_share": float((comp["low"] & ~comp["c"] & ~comp["free"] & ~comp["masked"]).mean() or 0.0),
        "sample_weight_min": float(per_sample["sample_weight"].min() or 0.0),  # type: ignore[arg-type]
        "sample_weight_max": float(per_sample["sample_weight"].max() or 0.0),  # type: ignore[arg-type]
        "samples_with_region": int((per_sample["R"] > 0).sum()),
        **_spread_stats(comp, per_sample),
    }
    return data, stats


def _spread_stats(comp: pl.DataFrame, per_sample: pl.DataFrame) -> dict[str, float]:
    """How much CuSeT acts: regions, high-confidence share, masked share of boilerplate-kind and sensitive
    tokens, the spread of the sample weights."""
    sens = comp.filter(pl.col("c"))
    rest = comp.filter(~pl.col("c"))
    return {
        "regions": float(comp.filter(pl.col("region_id").is_not_null()).select("sample", "region_id").n_unique()),
        "high_share": float(comp["high"].mean() or 0.0),
        "masked_share_of_sensitive": float(sens["masked"].mean() or 0.0) if sens.height else 0.0,
        "masked_share_of_other": float(rest["masked"].mean() or 0.0) if rest.height else 0.0,
        "sample_weight_std": float(per_sample["sample_weight"].std() or 0.0),  # type: ignore[arg-type]
    }
