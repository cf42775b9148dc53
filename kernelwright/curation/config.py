"""Config of `kernelwright curate`: one field per setting, with its units and off-value."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.cuda.nvrtc.program import DEFAULT_ARCH
from kernelwright.curation.filters import FilterSettings
from kernelwright.curation.ingest import FIELDS
from kernelwright.curation.weights import MASK_TARGETS, CusetParams, MaskTarget
from kernelwright.workdir import TRACKING_URI_HELP


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
    allow_unverified: bool = field(default=False, metadata={
        "help": "Keep pairs whose meta says they were never verified on a GPU (`synthesize` without one writes "
                "`verified: false`); off: such an input is refused."})
    workers: int = field(default=0, metadata={"help": "Processes for NVRTC compiles. 0: one per CPU core."})
    split: str = field(
        default="train",
        metadata={"help": "Seed corpus split to curate: train, test (held-out tasks) or all."},
    )
    with_seed_split: bool = field(default=False, metadata={
        "help": "With --input: the seed corpus's --split split too, beside the inputs (its held-out tasks stay "
                "out with the default train split). Off: the inputs alone."})
    base_model: str | None = field(
        default=None,
        metadata={"help": "Local HF checkpoint that scores p_t and tokenises. None: the tiny local model."},
    )
    out: str | None = field(default=None, metadata={"help": "Output folder. None: <workdir>/curated."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
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
        metadata={"help": "Masking strength: k_s = floor(rho_max * share_s * candidates_s) tokens of a sample are "
                          "masked (share_s: its low-confidence non-sensitive share under mask_target=uncertain, its "
                          "high-confidence share under confident); 0: off."},
    )
    mask_target: MaskTarget = field(
        default="uncertain",
        metadata={"help": "Which non-sensitive tokens outside low-confidence sensitive regions the mask takes: "
                          "uncertain (p < tau_low, least confident first) or confident (p >= tau_high, most "
                          "confident first; the earlier reading)."},
    )
    mask_floor: float = field(
        default=0.0,
        metadata={"help": "Weight a masked token keeps in the loss, in [0, 1] (0: a hard mask)."},
    )
    mask_fixed: bool = field(
        default=False,
        metadata={"help": "Under mask_target=uncertain, let the mask take tokens that are no free choice: syntax, "
                          "whitespace, a name already used in the prompt or earlier in the answer; off: the mask "
                          "takes only first-use names and numbers (curation/free_choices.py)."},
    )
    alpha: float = field(default=1.0, metadata={"help": "Weight of sensitive high-confidence tokens (1: neutral)."})
    region_lambda: float = field(default=1.0, metadata={"help": "Strength of region-aware sample weighting; 0: off."})
    w_min: float = field(default=0.5, metadata={"help": "Lower clip of the sample weight before renormalising."})
    w_max: float = field(default=3.0, metadata={"help": "Upper clip of the sample weight before renormalising."})

    def __post_init__(self) -> None:
        if self.split not in ("train", "test", "all"):
            raise ValueError(f"split must be train, test or all, not {self.split!r}")
        if self.with_seed_split and not self.input:
            raise ValueError("with_seed_split needs --input: without one the seed corpus's split is the corpus already")
        if not 0.0 <= self.tau_low <= self.tau_high <= 1.0:
            raise ValueError("need 0 <= tau_low <= tau_high <= 1")
        if self.w_min > self.w_max:
            raise ValueError("need w_min <= w_max")
        if min(self.rho_max, self.alpha, self.region_lambda, self.w_min, self.region_gap) < 0:
            raise ValueError("rho_max, alpha, region_lambda, w_min and region_gap must not be negative")
        if self.mask_target not in MASK_TARGETS:
            raise ValueError(f"mask_target must be one of {', '.join(MASK_TARGETS)}, not {self.mask_target!r}")
        if not 0.0 <= self.mask_floor <= 1.0:
            raise ValueError("mask_floor is the weight a masked token keeps, in [0, 1]")
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
            mask_target=self.mask_target, mask_floor=self.mask_floor, mask_fixed=self.mask_fixed,
        )

    def filters(self, workdir: Path) -> FilterSettings:
        return FilterSettings(
            near_dup_threshold=self.near_dup_threshold or 2.0, shingle=self.near_dup_shingle,
            num_perm=self.near_dup_num_perm, nvrtc=self.nvrtc, nvrtc_arch=self.nvrtc_arch,
            workers=self.workers or os.cpu_count() or 1, cache_dir=workdir / "cache" / "nvrtc",
            torch_compute_filter=self.torch_compute_filter,
        )
