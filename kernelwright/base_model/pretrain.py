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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import mlflow
import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from kernelwright import atomic, jsontext
from kernelwright.base_model.config import LAYER_TYPES, REGISTERED_BASE, Preset, PretrainConfig
from kernelwright.base_model.corpus import (
    Corpus,
    Source,
    build_corpus,
    exclusion_folders,
    folder_sources,
    plan_corpus,
    require_installed,
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
from kernelwright.model_card import log_local_model
from kernelwright.models import load_tokenizer
from kernelwright.tracking import log_config, stage_run
from kernelwright.workdir import base_model_dir, resolve_workdir

log = logging.getLogger(__name__)
META_FILE = "kernelwright.json"




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


def check_pretrain_config(cfg: PretrainConfig) -> None:
    """Refuse missing folders before any store is touched."""
    folder_sources(cfg.source)
    require_installed(cfg.require_sources)
    for folder in cfg.decontaminate_against:
        if not Path(folder).is_dir():
            raise UsageError(f"--decontaminate-against: folder not found: {folder}")


def _exclusions(cfg: PretrainConfig) -> list[Path]:
    check_pretrain_config(cfg)
    return exclusion_folders(cfg.decontaminate_against)


def build_key(cfg: PretrainConfig, corpus_digest: str) -> str:
    blob = json.dumps({"corpus": corpus_digest, "config": cfg.identity()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def read_meta(path: Path) -> dict[str, Any] | None:
    try:
        meta = jsontext.loads((path / META_FILE).read_text(encoding="utf-8"))
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
    config = model_config(p, len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def model_config(p: Preset, vocab_size: int, bos: int | None, eos: int | None, pad: int | None) -> Any:
    """The transformers config of a preset's model (LFM2's shape, `_new_model`)."""
    return AutoConfig.for_model(
        "lfm2", vocab_size=vocab_size, hidden_size=p.hidden_size, intermediate_size=p.intermediate_size,
        block_auto_adjust_ff_dim=False, num_hidden_layers=len(p.layers), conv_L_cache=p.conv_kernel,
        layer_types=[LAYER_TYPES[k] for k in p.layers], num_attention_heads=p.num_attention_heads,
        num_key_value_heads=p.num_key_value_heads, max_position_embeddings=max(8192, p.seq_len),
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=pad,
    )


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


def run_pretrain(cfg: PretrainConfig, on_step: OnStep | None = None) -> PretrainResult:
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
    log_config(cfg, "base-model pretrain")
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
    info = log_local_model({"model": model, "tokenizer": tokenizer}, "base-model pretrain",
                           registered_model_name=REGISTERED_BASE,
                           pip_requirements=["kernelwright", "torch", "transformers"])
    version = getattr(info, "registered_model_version", None)
    return str(version) if version is not None else None


def ensure_default_base(workdir: Path, max_steps: int = 0) -> Path:
    """The tiny base in `<workdir>/base-model`: reused when its digest and config match, else pretrained
    now (as a nested MLflow run `base-model` when a run is active): `max_steps` optimizer steps exactly, or with
    0 as many as the size's minutes allow."""
    cfg = PretrainConfig(workdir=str(workdir), max_steps=max_steps)
    if mlflow.active_run() is None:
        return run_pretrain(cfg).path
    meta = read_meta(_output(cfg))
    if meta is not None and meta.get("key") == build_key(cfg, plan_corpus(cfg.selection()).digest):
        return _output(cfg)
    log.info("pretraining the tiny base model in %s", _output(cfg))
    with stage_run("base-model"):
        return run_pretrain(cfg).path
