"""`kernelwright base-model pretrain`: a code-pretrained base model, built here from installed code.

    kernelwright base-model pretrain                         # tiny (~0.4M params), 3 min on 2 CPU cores
    kernelwright base-model pretrain --size small --out /models/kw-base-small     # ~90M params, for a GPU
    kernelwright base-model pretrain --size micro --source DIR --max-steps 20      # seconds: smoke tests

Trains a byte-level BPE tokenizer and a causal LM of LFM2's shape (gated short-convolution layers
below attention layers) with the plain next-token loss on the code of the installed packages
(`corpus`), decontaminated against the seed corpus and the evaluation suite. The result is an
ordinary HF checkpoint folder (`--out`, default `<workdir>/base-model`) with `kernelwright.json`
(corpus digest, config, figures), logged to an MLflow run `base-model` and registered as
`kernelwright-base`. A folder whose corpus digest and config match is reused as it is (`--force`
builds again). Interrupted, it resumes from the checkpoint beside the output folder
(`.<out>.pretrain/`) on the next run of the same command. With no `--base-model`, curate, train
and pipeline use the tiny base (`ensure_default_base`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import mlflow
import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from kernelwright import atomic
from kernelwright.base_model.corpus import (
    Corpus,
    Selection,
    Source,
    build_corpus,
    exclusion_folders,
    folder_sources,
    plan_corpus,
)
from kernelwright.base_model.loop import (
    LoopPlan,
    LoopState,
    OnStep,
    bf16_fast,
    load_state,
    make_optimizer,
    train_loop,
)
from kernelwright.base_model.perplexity import heldout_perplexity
from kernelwright.base_model.tokenizer import BlockSampler, encode_corpus, train_code_tokenizer
from kernelwright.config import config_to_params
from kernelwright.errors import UsageError
from kernelwright.models import load_tokenizer
from kernelwright.tracking import stage_run
from kernelwright.workdir import TRACKING_URI_HELP, base_model_dir, resolve_workdir

log = logging.getLogger(__name__)
REGISTERED_BASE = "kernelwright-base"
META_FILE = "kernelwright.json"


@dataclass(frozen=True)
class Preset:
    """A size: the model's shape and what it trains on, for how long."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layers: str  # one letter a layer, bottom up: c a gated short convolution, a attention
    num_attention_heads: int
    num_key_value_heads: int
    seq_len: int
    short_seq_len: int  # curriculum: sequences of this length first (0: none)
    short_share: float  # share of the schedule on short sequences
    batch_size: int  # sequences of short_seq_len (or seq_len) per step; the long phase keeps the tokens
    learning_rate: float
    minutes: float
    corpus_chars: int  # 0: every document of the sources
    tokenizer_chars: int
    copy_share: float = 0.0  # share of sequences that are copying exercises (BlockSampler)
    copy_steps: int = 0  # first steps on copying exercises only (LoopPlan)
    conv_kernel: int = 3  # tokens each short convolution sees (LFM2's conv_L_cache)


SIZES = {
    "micro": Preset(512, 32, 64, "ca", 2, 1, 128, 0, 0.0, 4, 1e-2, 0.5, 300_000, 100_000),
    "tiny": Preset(416, 128, 352, "ca", 4, 2, 2048, 256, 0.7, 8, 3e-3, 3.0, 5_000_000, 2_000_000,
                   copy_share=0.1, copy_steps=800),
    "small": Preset(16384, 768, 2048, "ccaccaccacca", 12, 4, 2048, 0, 0.0, 16, 6e-4, 25.0, 0, 20_000_000),
}
LAYER_TYPES = {"c": "conv", "a": "full_attention"}


@dataclass
class PretrainConfig:
    """Config of `kernelwright base-model pretrain`."""

    size: str = field(default="tiny", metadata={"help": "micro (seconds, for tests), tiny (~0.4M params, a CPU) "
                                                        "or small (~90M params, a GPU)."})
    minutes: float = field(default=0.0, metadata={"help": "Wall-clock budget of the whole build, in minutes; "
                                                          "training stops in time. 0: the size's (tiny 3)."})
    max_steps: int = field(default=0, metadata={"help": "Optimizer steps at most; 0: what the budget allows."})
    out: str | None = field(default=None, metadata={"help": "Checkpoint folder. None: <workdir>/base-model."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
    source: list[str] = field(default_factory=list, metadata={
        "help": "Folders of code to pretrain on instead of the installed packages'; repeatable.", "action": "extend"})
    decontaminate_against: list[str] = field(default_factory=list, metadata={
        "help": "More evaluation folders to exclude (the seed corpus and the suite always are); repeatable.",
        "action": "extend"})
    corpus_chars: int = field(default=-1, metadata={"help": "Characters of pretraining text; 0: all; -1: the "
                                                            "size's (tiny 5M, before decontamination)."})
    seq_len: int = field(default=0, metadata={"help": "Tokens per full-length sequence; 0: the size's (tiny 2048)."})
    batch_size: int = field(default=0, metadata={"help": "Short sequences per step (full-length ones: as many as "
                                                         "hold the same tokens); 0: the size's (tiny 8)."})
    learning_rate: float = field(default=0.0, metadata={"help": "Peak learning rate; 0: the size's (tiny 3e-3)."})
    warmup_steps: int = field(default=10, metadata={"help": "Linear warm-up steps before the cosine decay."})
    decontam_ngram: int = field(default=13, metadata={"help": "Decontamination n-gram length, in code tokens."})
    decontam_min_share: float = field(default=0.0, metadata={
        "help": "A document is left out when it holds more than this share of a problem's n-grams (0: any one)."})
    checkpoint_s: float = field(default=60.0, metadata={"help": "Seconds between resumable checkpoints."})
    threads: int = field(default=0, metadata={
        "help": "CPU threads while pretraining on a CPU; 0: one for micro, for tiny the cores the load average shows "
                "idle (spinning threads lose much when other work shares the cores), all for small."})
    bf16: bool | None = field(default=None, metadata={
        "help": "bfloat16 autocast while training (float32 weights). None: on a GPU, and on a CPU with bf16 "
                "instructions (AVX512-BF16, AMX); false: float32 throughout."})
    seed: int = field(default=0, metadata={"help": "Seed of the weights and of the document order."})
    register: bool = field(default=True, metadata={"help": f"Register the result as {REGISTERED_BASE} in MLflow."})
    force: bool = field(default=False, metadata={"help": "Build again even when a matching base exists."})

    def __post_init__(self) -> None:
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {', '.join(SIZES)}, not {self.size!r}")
        if min(self.minutes, self.max_steps, self.seq_len, self.batch_size, self.learning_rate, self.threads) < 0:
            raise ValueError("minutes, max_steps, seq_len, batch_size, learning_rate and threads must be >= 0")
        if self.seq_len and SIZES[self.size].short_seq_len and self.seq_len % SIZES[self.size].short_seq_len:
            raise ValueError(f"seq_len must be a multiple of {SIZES[self.size].short_seq_len} for size {self.size}")
        if self.decontam_ngram < 1 or not 0.0 <= self.decontam_min_share < 1.0 or self.corpus_chars < -1:
            raise ValueError("need decontam_ngram >= 1, 0 <= decontam_min_share < 1 and corpus_chars >= -1")

    def preset(self) -> Preset:
        """The size's preset with this config's overrides."""
        p = SIZES[self.size]
        return replace(p, seq_len=self.seq_len or p.seq_len, batch_size=self.batch_size or p.batch_size,
                       learning_rate=self.learning_rate or p.learning_rate, minutes=self.minutes or p.minutes,
                       corpus_chars=p.corpus_chars if self.corpus_chars < 0 else self.corpus_chars)

    def selection(self) -> Selection:
        return Selection(max_chars=self.preset().corpus_chars, seed=self.seed, ngram=self.decontam_ngram,
                         min_share=self.decontam_min_share)

    def identity(self) -> dict[str, Any]:
        """What the built model depends on besides the corpus (where it goes and tracking excluded)."""
        keep = ("size", "max_steps", "warmup_steps", "bf16", "seed")
        return {"preset": asdict(self.preset()), **{k: getattr(self, k) for k in keep}}


@dataclass(frozen=True)
class PretrainResult:
    path: Path
    reused: bool
    corpus_digest: str
    key: str
    steps: int
    tokens: int
    final_loss: float
    wall_s: float
    parameters: int
    heldout_bits_per_char: float | None
    registered_version: str | None
    run_id: str | None


def _output(cfg: PretrainConfig) -> Path:
    return Path(cfg.out) if cfg.out else base_model_dir(resolve_workdir(cfg.workdir))


def _sources(cfg: PretrainConfig) -> list[Source] | None:
    return folder_sources(cfg.source) if cfg.source else None


def check_arguments(cfg: PretrainConfig) -> None:
    """Refuse missing folders before any store is touched."""
    folder_sources(cfg.source)
    for folder in cfg.decontaminate_against:
        if not Path(folder).is_dir():
            raise UsageError(f"--decontaminate-against: folder not found: {folder}")


def _exclusions(cfg: PretrainConfig) -> list[Path]:
    check_arguments(cfg)
    return exclusion_folders(cfg.decontaminate_against)


def build_key(cfg: PretrainConfig, corpus_digest: str) -> str:
    blob = json.dumps({"corpus": corpus_digest, "config": cfg.identity()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def read_meta(path: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and (path / "config.json").is_file() else None


def _reused(path: Path, meta: dict[str, Any]) -> PretrainResult:
    return PretrainResult(
        path=path, reused=True, corpus_digest=meta["corpus_digest"], key=meta["key"], steps=meta["steps"],
        tokens=meta["tokens"], final_loss=meta["final_loss"], wall_s=0.0, parameters=meta["parameters"],
        heldout_bits_per_char=meta.get("heldout", {}).get("bits_per_char"),
        registered_version=meta.get("registered_version"), run_id=meta.get("run_id"))


def _new_model(p: Preset, tokenizer: PreTrainedTokenizerBase, seed: int) -> PreTrainedModel:
    """A causal LM of LFM2's shape: gated short convolutions (kernel 3) and attention layers, each with
    a SwiGLU MLP. At the tiny size on a CPU, a convolution below one attention layer reached a lower
    loss in the same time than two attention layers of the same width (Llama's shape), and attention
    with rotary positions trained on short sequences carried over to long ones badly. Not Qwen2: for
    a `qwen2` config, AutoTokenizer swaps the saved byte-level tokenizer for Qwen2's own
    pre-tokenisation, so the curated token ids would not be the pretrained ones."""
    config = AutoConfig.for_model(
        "lfm2", vocab_size=len(tokenizer), hidden_size=p.hidden_size, intermediate_size=p.intermediate_size,
        block_auto_adjust_ff_dim=False, num_hidden_layers=len(p.layers), conv_L_cache=p.conv_kernel,
        layer_types=[LAYER_TYPES[k] for k in p.layers], num_attention_heads=p.num_attention_heads,
        num_key_value_heads=p.num_key_value_heads, max_position_embeddings=max(8192, p.seq_len),
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def _tokenizer(ckpt: Path, corpus: Corpus, p: Preset) -> PreTrainedTokenizerBase:
    """The checkpoint's tokenizer when resuming, else one trained now (and kept there)."""
    folder = ckpt / "tokenizer"
    if (folder / "tokenizer_config.json").is_file():
        return load_tokenizer(folder)
    tokenizer = train_code_tokenizer(corpus.documents, p.vocab_size, p.tokenizer_chars)
    atomic.write_dir(folder, lambda tmp: tokenizer.save_pretrained(tmp))
    return tokenizer


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _bf16(cfg: PretrainConfig) -> bool:
    return bf16_fast(_device()) if cfg.bf16 is None else cfg.bf16


def idle_cores(cores: int, load_1min: float) -> int:
    """Cores no other work is using, going by the 1-minute load average less this process's own one
    (it has been busy importing and reading the corpus); at least one."""
    return max(1, min(cores, round(cores - max(0.0, load_1min - 1.0))))


def _size_threads(size: str, cores: int) -> int:
    """The size's default: micro one (tests build it beside other work), tiny the idle cores, else all."""
    if size == "micro":
        return 1
    return idle_cores(cores, os.getloadavg()[0]) if size == "tiny" else cores


@contextmanager
def _cpu_threads(cfg: PretrainConfig) -> Iterator[None]:
    """torch's intra-op threads set for the build on a CPU, and put back after it."""
    before = torch.get_num_threads()
    wanted = cfg.threads or _size_threads(cfg.size, before)
    if not torch.cuda.is_available():
        torch.set_num_threads(wanted)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def pretrain(cfg: PretrainConfig, on_step: OnStep | None = None) -> PretrainResult:
    """Build (or reuse) the base model; inside an active MLflow run, log and register it there."""
    with _cpu_threads(cfg):
        return _pretrain(cfg, on_step)


def _pretrain(cfg: PretrainConfig, on_step: OnStep | None) -> PretrainResult:
    start = time.perf_counter()
    out, sel, exclude = _output(cfg), cfg.selection(), _exclusions(cfg)
    plan = plan_corpus(sel, _sources(cfg), exclude)
    key = build_key(cfg, plan.digest)
    meta = read_meta(out)
    if meta is not None and meta.get("key") == key and not cfg.force:
        return _reused(out, meta)
    corpus = build_corpus(sel, _sources(cfg), exclude)
    ckpt = out.with_name(f".{out.name}.pretrain")
    if (ckpt / "key").is_file() and (ckpt / "key").read_text() != key:
        shutil.rmtree(ckpt)
    ckpt.mkdir(parents=True, exist_ok=True)
    atomic.write_text(ckpt / "key", key)
    p = cfg.preset()
    tokenizer = _tokenizer(ckpt, corpus, p)
    model = _new_model(p, tokenizer, cfg.seed).to(_device())
    opt = make_optimizer(model, p.learning_rate)
    state = load_state(ckpt, model, opt)
    _log_start(cfg, corpus, model, resumed=state.step > 0)
    blocks = BlockSampler(encode_corpus(tokenizer, corpus.documents), p.short_seq_len or p.seq_len, cfg.seed,
                          p.copy_share)
    budget = max(p.minutes * 60 - (time.perf_counter() - start) - min(20.0, p.minutes * 6), 1.0)
    loop = LoopPlan(batch_size=p.batch_size, learning_rate=p.learning_rate, warmup_steps=cfg.warmup_steps,
                    max_steps=cfg.max_steps, budget_s=budget if not cfg.max_steps or cfg.minutes else 0.0,
                    checkpoint_s=cfg.checkpoint_s, short_share=p.short_share if p.short_seq_len else 0.0,
                    units_per_sequence=p.seq_len // p.short_seq_len if p.short_seq_len else 1, bf16=_bf16(cfg),
                    copy_steps=p.copy_steps)
    state = train_loop(model, opt, blocks, loop, state, ckpt, on_step)
    return _finish(cfg, out, key, corpus, model, tokenizer, state, start)


def _log_start(cfg: PretrainConfig, corpus: Corpus, model: PreTrainedModel, resumed: bool) -> None:
    if mlflow.active_run() is None:
        return
    params = config_to_params(cfg, "base.")
    params.update({f"base.preset.{k}": str(v) for k, v in asdict(cfg.preset()).items()})
    params.update({"base.corpus_digest": corpus.digest, "base.corpus_documents": str(len(corpus.documents)),
                   "base.corpus_chars": str(corpus.chars), "base.corpus_excluded": str(len(corpus.excluded)),
                   "base.parameters": str(sum(x.numel() for x in model.parameters()))})
    params.update({f"base.corpus_chars.{k}": str(v) for k, v in corpus.by_source().items()})
    mlflow.log_params(params)
    mlflow.set_tags({"kw.resumed": str(resumed), "kw.cpu_threads": str(torch.get_num_threads())})
    mlflow.log_dict({"digest": corpus.digest, "excluded": corpus.excluded,
                     "documents": [d.key for d in corpus.documents]}, "base-model/corpus.json")


def _finish(cfg: PretrainConfig, out: Path, key: str, corpus: Corpus, model: PreTrainedModel,
            tokenizer: PreTrainedTokenizerBase, state: LoopState, start: float) -> PretrainResult:
    """Held-out figures, the checkpoint folder (atomically), MLflow registration; the checkpoint removed."""
    heldout = heldout_perplexity(model, tokenizer)
    run = mlflow.active_run()
    meta = {"built_by": "kernelwright base-model pretrain", "key": key, "corpus_digest": corpus.digest,
            "config": cfg.identity(), "steps": state.step, "train_s": state.spent_s,
            "tokens": state.tokens, "final_loss": state.last_loss, "losses": state.losses,
            "parameters": sum(x.numel() for x in model.parameters()), "heldout": asdict(heldout),
            "corpus": {"documents": len(corpus.documents), "chars": corpus.chars,
                       "excluded": len(corpus.excluded)}, "run_id": run.info.run_id if run else None}
    version = _register(model, tokenizer) if run is not None and cfg.register else None
    meta["registered_version"] = version
    model = model.to("cpu")

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    atomic.write_dir(out, fill)
    shutil.rmtree(out.with_name(f".{out.name}.pretrain"), ignore_errors=True)
    wall = time.perf_counter() - start
    if run is not None:
        mlflow.log_metrics({**heldout.as_metrics("heldout."), "wall_s": wall, "final_loss": state.last_loss})
    return PretrainResult(path=out, reused=False, corpus_digest=corpus.digest, key=key, steps=state.step,
                          tokens=state.tokens, final_loss=state.last_loss, wall_s=wall,
                          parameters=meta["parameters"], heldout_bits_per_char=heldout.bits_per_char,
                          registered_version=version, run_id=meta["run_id"])


def _register(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> str | None:
    info = mlflow.transformers.log_model(  # type: ignore[attr-defined]
        transformers_model={"model": model, "tokenizer": tokenizer}, name="model", task="text-generation",
        registered_model_name=REGISTERED_BASE, pip_requirements=["kernelwright", "torch", "transformers"])
    version = getattr(info, "registered_model_version", None)
    return str(version) if version is not None else None


def ensure_default_base(workdir: Path) -> Path:
    """The tiny base in `<workdir>/base-model`: reused when its digest and config match, else pretrained
    now (as a nested MLflow run `base-model` when a run is active)."""
    cfg = PretrainConfig(workdir=str(workdir))
    if mlflow.active_run() is None:
        return pretrain(cfg).path
    meta = read_meta(_output(cfg))
    if meta is not None and meta.get("key") == build_key(cfg, plan_corpus(cfg.selection()).digest):
        return _output(cfg)
    log.info("pretraining the tiny base model in %s", _output(cfg))
    with stage_run("base-model"):
        return pretrain(cfg).path
