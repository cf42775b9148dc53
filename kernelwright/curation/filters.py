"""Corpus filters, each counted with the ids it removed and why (report.json and an MLflow table).

    kernelwright curate --input corpus.jsonl [--near-dup-threshold 0.85] [--nvrtc false] --out DIR

Cheap to expensive; a sample is removed by the first filter it fails, under that reason:
1. exact_duplicate: same normalised code tokens (`code_norm`) as an earlier sample;
2. the static cheat checks of `evaluation.static_checks` (one implementation with `verify`), in
   this order: syntax_error, no_model_new, harness_tampering, fallback_try_except, fallback_torch_op;
   then torch_compute_in_cuda: the C++/CUDA host code calls PyTorch compute (`at::matmul`, `x.sum()`,
   ...; `cuda.torch_calls`, one implementation with `verify`'s warning; `torch_compute_filter=False`: off);
3. no_kernel: no `__global__` kernel built, launched and called (`check_source(require_call=True)`);
4. contaminated: overlaps an evaluation problem (`decontaminate`, computed by the caller);
5. near_duplicate: MinHash/LSH Jaccard of code shingles over a threshold (`near_dup`);
6. nvrtc_error: the device code does not compile with NVRTC (`nvrtc_filter`, cached);
(7. too_long, in `stage.curate_samples`: over the token limit in the target tokenizer.)
An infill row (a `partial` solution and a fenced CUDA answer) is checked as the file the answer makes
spliced into its partial (`solution_code`): the static checks, the kernel, NVRTC and the duplicate
filters see that file; duplicates are looked for among rows of one kind (whole files; infill rows of
one region kind), as an infill row and the pair it came from are different training tasks.
Rows that failed to parse at ingestion are `parse_errors`. Besides the removals, `flagged`
records every sample each static check and the decontamination flag, whichever filter removed
it: an audit of the corpus, not a second count.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from kernelwright.code_norm import code_tokens
from kernelwright.cuda.nvrtc.device import NvrtcUnavailable, compile_many
from kernelwright.cuda.nvrtc.program import DEFAULT_ARCH
from kernelwright.cuda.spans import cuda_source_of
from kernelwright.cuda.static_checks import StaticReport, check_source
from kernelwright.cuda.torch_calls import TorchCallScan, scan_candidate
from kernelwright.curation.near_dup import NearDuplicate, near_duplicates
from kernelwright.errors import UsageError
from kernelwright.infill_format import splice
from kernelwright.prompting import extract_code

log = logging.getLogger(__name__)

STATIC_REASONS = ("syntax_error", "no_model_new", "harness_tampering", "fallback_try_except", "fallback_torch_op")
TORCH_COMPUTE = "torch_compute_in_cuda"
REASONS = ("exact_duplicate", *STATIC_REASONS, TORCH_COMPUTE, "no_kernel", "contaminated", "near_duplicate",
           "nvrtc_error")


class HasCompletion(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def completion(self) -> str: ...


S = TypeVar("S", bound=HasCompletion)
Removals = dict[str, tuple[str, str]]  # id -> (reason, detail)


def solution_code(sample: HasCompletion) -> str:
    """The file a sample's completion gives: its fenced solution, or an infill answer spliced into the
    sample's `partial` (an attribute only infill samples set)."""
    partial = getattr(sample, "partial", None)
    return splice(partial, sample.completion) if isinstance(partial, str) else extract_code(sample.completion)


def _group(sample: HasCompletion) -> str:
    """The rows a sample can duplicate: whole files (""), or infill rows of its region kind."""
    return str(getattr(sample, "region_kind", None) or "") if getattr(sample, "partial", None) is not None else ""


def _entry(ids: Sequence[str], details: Mapping[str, str]) -> dict:
    return {"count": len(ids), "ids": list(ids), "details": {i: details[i] for i in ids if i in details}}


@dataclass
class FilterReport:
    input_rows: int = 0
    removed: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, dict[str, str]] = field(default_factory=dict)  # reason -> id -> why
    parse_errors: dict[str, str] = field(default_factory=dict)  # id -> why
    flagged: dict[str, dict[str, str]] = field(default_factory=dict)  # check -> id -> why (audit)
    seconds: dict[str, float] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)

    def remove(self, reason: str, ids: Sequence[str], details: Mapping[str, str] | None = None) -> None:
        self.removed.setdefault(reason, []).extend(ids)
        given = details or {}
        self.details.setdefault(reason, {}).update({i: given[i] for i in ids if i in given})

    def flag(self, check: str, details: Mapping[str, str]) -> None:
        self.flagged.setdefault(check, {}).update(details)

    @property
    def kept(self) -> int:
        return self.input_rows - len(self.parse_errors) - sum(len(v) for v in self.removed.values())

    def as_dict(self) -> dict:
        return {
            "input_rows": self.input_rows,
            "kept": self.kept,
            "parse_errors": _entry(list(self.parse_errors), self.parse_errors),
            "removed": {k: _entry(v, self.details.get(k, {})) for k, v in self.removed.items()},
            "flagged": {k: _entry(sorted(v), v) for k, v in self.flagged.items()},
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "stats": self.stats,
        }

    def table(self) -> dict[str, list]:
        reasons = ["parse_error", *self.removed]
        ids = {"parse_error": list(self.parse_errors), **self.removed}
        return {"filter": reasons, "removed": [len(ids[r]) for r in reasons],
                "flagged": [len(self.flagged.get(r, {})) for r in reasons],
                "example_ids": [", ".join(ids[r][:5]) for r in reasons]}


@dataclass(frozen=True)
class FilterSettings:
    near_dup_threshold: float = 0.85  # Jaccard; above 1: off
    shingle: int = 5
    num_perm: int = 128
    nvrtc: bool = True
    nvrtc_arch: str = DEFAULT_ARCH
    workers: int = 2
    cache_dir: Path | None = None  # NVRTC results on disk (cuda.nvrtc.cache); None: in this process only
    torch_compute_filter: bool = True  # remove samples whose C++/CUDA host code calls PyTorch compute


def _exact_step(tokens: Mapping[str, list[str]]) -> Callable[[Sequence[S]], Removals]:
    def step(samples: Sequence[S]) -> Removals:
        seen: dict[str, str] = {}
        out: Removals = {}
        for s in samples:
            key = hashlib.sha256((_group(s) + "\0" + " ".join(tokens[s.id])).encode()).hexdigest()
            if key in seen:
                out[s.id] = ("exact_duplicate", f"same code as {seen[key]}")
            else:
                seen[key] = s.id
        return out
    return step


def _first_static(report: StaticReport, reasons: Sequence[str]) -> tuple[str, str] | None:
    reason = next((r for r in reasons if r in report.reasons), None)
    return (reason, report.by_reason[reason][0]) if reason else None


def _static_step(reports: Mapping[str, StaticReport], reasons: Sequence[str]) -> Callable[[Sequence[S]], Removals]:
    def step(samples: Sequence[S]) -> Removals:
        out: Removals = {}
        for s in samples:
            hit = _first_static(reports[s.id], reasons)
            if hit:
                out[s.id] = hit
        return out
    return step


def _torch_compute_step(scans: Mapping[str, TorchCallScan]) -> Callable[[Sequence[S]], Removals]:
    def step(samples: Sequence[S]) -> Removals:
        return {s.id: (TORCH_COMPUTE, scans[s.id].detail) for s in samples if s.id in scans and scans[s.id].flagged}
    return step


def _scan_static(codes: Mapping[str, str], settings: FilterSettings,
                 report: FilterReport) -> tuple[dict[str, StaticReport], dict[str, TorchCallScan]]:
    """The static checks and (unless off) the torch-compute scan of every sample, flagged for the audit."""
    start = time.perf_counter()
    reports = {k: check_source(code, require_call=True) for k, code in codes.items()}
    scans = {k: scan_candidate(code) for k, code in codes.items()} if settings.torch_compute_filter else {}
    report.seconds["static_checks"] = time.perf_counter() - start
    for reason in (*STATIC_REASONS, "no_kernel"):
        report.flag(reason, {k: "; ".join(r.by_reason[reason]) for k, r in reports.items() if reason in r.reasons})
    report.flag(TORCH_COMPUTE, {k: scan.detail for k, scan in scans.items() if scan.flagged})
    return reports, scans


def _near_dup_step(settings: FilterSettings, tokens: Mapping[str, list[str]]) -> Callable[[Sequence[S]], Removals]:
    def step(samples: Sequence[S]) -> Removals:
        if settings.near_dup_threshold > 1:
            return {}
        found: dict[str, NearDuplicate] = {}
        for group in dict.fromkeys(_group(s) for s in samples):
            found |= near_duplicates([(s.id, tokens[s.id]) for s in samples if _group(s) == group],
                                     settings.near_dup_threshold, settings.shingle, settings.num_perm)
        return {k: ("near_duplicate", f"~{d.of} (Jaccard {d.jaccard:.2f})") for k, d in found.items()}
    return step


def _nvrtc_step(settings: FilterSettings, report: FilterReport,
                codes: Mapping[str, str]) -> Callable[[Sequence[S]], Removals]:
    def step(samples: Sequence[S]) -> Removals:
        if not settings.nvrtc:
            return {}
        items = [(s.id, cuda_source_of(codes[s.id])) for s in samples]
        todo = [(k, src) for k, src in items if src]
        try:
            batch = compile_many([src for _, src in todo], settings.workers, settings.nvrtc_arch, settings.cache_dir)
        except NvrtcUnavailable as exc:
            raise UsageError(f"{exc}: pass --nvrtc false to curate without the NVRTC filter") from None
        report.stats.update(nvrtc_compiled=batch.compiled, nvrtc_cache_hits=batch.cache_hits)
        out: Removals = {k: ("nvrtc_error", "no CUDA source string to compile") for k, src in items if not src}
        for (k, _), res in zip(todo, batch.results, strict=True):
            if not res.ok:
                first = next((ln for ln in res.log.splitlines() if "error" in ln), res.log[:200])
                out[k] = ("nvrtc_error", first.strip())
        return out
    return step


def run_filters(samples: Sequence[S], settings: FilterSettings, contaminated: Mapping[str, str] | None = None,
                report: FilterReport | None = None) -> tuple[list[S], FilterReport]:
    """Apply the filters in order; `contaminated` maps the ids to remove as contaminated to their matches."""
    report = report if report is not None else FilterReport(input_rows=len(samples))
    for reason in REASONS:
        report.removed.setdefault(reason, [])
    codes = {s.id: solution_code(s) for s in samples}
    tokens = {k: code_tokens(code) for k, code in codes.items()}  # exact and near duplicates compare these
    reports, scans = _scan_static(codes, settings, report)
    contaminated = contaminated or {}
    steps: list[tuple[str, Callable[[Sequence[S]], Removals]]] = [
        ("exact_duplicate", _exact_step(tokens)),
        ("static", _static_step(reports, STATIC_REASONS)),
        ("torch_compute", _torch_compute_step(scans)),
        ("kernel_present", _static_step(reports, ("no_kernel",))),
        ("decontaminate", lambda ss: {s.id: ("contaminated", contaminated[s.id]) for s in ss if s.id in contaminated}),
        ("near_duplicate", _near_dup_step(settings, tokens)),
        ("nvrtc", _nvrtc_step(settings, report, codes)),
    ]
    kept = list(samples)
    for name, step in steps:
        start = time.perf_counter()
        removals = step(kept)
        for reason in dict.fromkeys(r for r, _ in removals.values()):
            ids = [s.id for s in kept if s.id in removals and removals[s.id][0] == reason]
            report.remove(reason, ids, {i: removals[i][1] for i in ids})
        kept = [s for s in kept if s.id not in removals]
        report.seconds[name] = time.perf_counter() - start
        log.info("filter %s: %d removed, %d left", name, len(removals), len(kept))
    return kept, report
