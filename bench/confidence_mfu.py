"""Confidence scoring (base-model p_t) throughput and MFU, random Qwen2-0.5B-shaped model in bf16.

    PYTHONPATH=. python bench/confidence_mfu.py --modes naive,eager,compiled \\
        --json docs/results/confidence_mfu.json                        # on one H200
    PYTHONPATH=. python bench/confidence_mfu.py --tiny                  # CPU smoke test

Imports only torch, transformers and kernelwright.curation.confidence (no polars), so it runs
on a bare GPU box. The model is built from `AutoConfig` (Qwen2-0.5B shape: hidden 896, 24
layers, 14 heads, 2 KV heads, intermediate 4864, vocab 151936, tied embeddings), random
weights, no download. Sequences: `--samples` random token sequences, lengths uniform in
[--min-len, --max-len].

Modes (each timed `--repeats` times after a warm-up; the best counts):
  eager     ConfidenceScorer with compile=False: eager decoder, and on a GPU the compiled
            log-softmax/gather head (fused_head); what `curate` runs on a CPU
  unfused   the same with fused_head=False (eager float32 log_softmax of each head chunk)
  compiled  ConfidenceScorer with compile=True (each decoder layer compiled in place, and the
            head; dynamic shapes): what `curate` runs on a GPU (gold_token_probs / score_chunked,
            compile left at its default). It runs last, as it changes the model's layers.
  naive     the previous implementation: attention mask, full logits, float32 log_softmax over
            the whole batch x vocab (with --naive-batch-tokens, its memory need is ~12 B/token/vocab)

FLOPs (forward only; only the real tokens count, never padding), for a sequence of L tokens:
  2 * N_body * L                       N_body: parameters of the decoder without the embedding
  + 2 * N_head * (L - 1)               N_head = vocab * hidden (the tied LM head, applied on the
                                       L - 1 positions that predict a token)
  + 2 * n_layers * hidden * L^2        causal attention: per token 4 * hidden * (L / 2) for
                                       QK^T and AV, summed over L tokens
MFU = FLOPs / time / peak, peak = --peak-tflops (989.4: H200 dense bf16).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from kernelwright import atomic
from kernelwright.curation.confidence import ConfidenceScorer, length_batches

QWEN2_05B = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                 intermediate_size=4864, vocab_size=151936)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=1024)


def build_model(shape: dict, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    cfg = AutoConfig.for_model("qwen2", **shape, tie_word_embeddings=True, max_position_embeddings=32768)
    torch.manual_seed(0)
    with device:
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def flops(model: torch.nn.Module, lengths: Sequence[int]) -> tuple[float, dict]:
    cfg = model.config
    body = sum(p.numel() for n, p in model.base_model.named_parameters() if "embed_tokens" not in n)
    head = cfg.vocab_size * cfg.hidden_size
    total = sum(2 * body * n + 2 * head * max(n - 1, 0) + 2 * cfg.num_hidden_layers * cfg.hidden_size * n * n
                for n in lengths)
    return float(total), {"n_body": body, "n_head": head}


@torch.inference_mode()
def naive_probs(model, sequences: Sequence[Sequence[int]], pad_id: int, batch_tokens: int) -> list[list[float]]:
    """The scorer as it was: masked batches, full float32 log-softmax over batch x length x vocab."""
    device = next(model.parameters()).device
    out: list[list[float]] = [[] for _ in sequences]
    for idx in length_batches([len(s) for s in sequences], batch_tokens):
        width = len(sequences[idx[0]])
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, i in enumerate(idx):
            ids[r, : len(sequences[i])] = torch.tensor(sequences[i])
            mask[r, : len(sequences[i])] = 1
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        gold = logp.gather(-1, ids[:, 1:].to(device).unsqueeze(-1)).squeeze(-1).exp().cpu()
        for r, i in enumerate(idx):
            out[i] = [float("nan")] + gold[r, : len(sequences[i]) - 1].tolist()
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_mode(fn: Callable[[], list[list[float]]], device: torch.device,
             repeats: int) -> tuple[float, list, float | None]:
    """(best seconds, result, peak GiB allocated); the first call is the warm-up (and compilation)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    warm = time.perf_counter() - t0
    best, out = math.inf, []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    print(f"  warm-up {warm:.1f} s")
    return best, out, peak


KINDS = (("gemm", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "matmul")),
         ("attention", ("flash", "fmha", "attention", "attn")),
         ("softmax/reduce", ("softmax", "reduce", "logsumexp")),
         ("copy/cast", ("copy", "cast", "fill", "index", "gather", "cat")))


def kernel_kind(name: str) -> str:
    low = name.lower()
    return next((kind for kind, keys in KINDS if any(k in low for k in keys)), "elementwise/other")


def profile_kernels(fn: Callable[[], object], top: int) -> dict:
    """GPU kernel time of one call of `fn`, by kind and for the `top` kernels (CUDA only)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = {}
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[evt.name] = per_kernel.get(evt.name, 0.0) + evt.device_time_total / 1e3
    total = sum(per_kernel.values())
    kinds: dict[str, float] = {}
    for name, ms in per_kernel.items():
        kinds[kernel_kind(name)] = kinds.get(kernel_kind(name), 0.0) + ms
    print(f"  profile: {total:.1f} ms of kernels; by kind: "
          + ", ".join(f"{k} {v / total:.1%}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))
    ranked = sorted(per_kernel.items(), key=lambda kv: -kv[1])[:top]
    for name, ms in ranked:
        print(f"    {ms / total:6.1%}  {ms:8.2f} ms  {name[:110]}")
    return {"kernel_ms": total, "by_kind_ms": kinds, "top": [{"name": n, "ms": ms} for n, ms in ranked]}


def max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max((abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra[1:], rb[1:], strict=True)),
               default=0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="Tiny model and data (CPU smoke test).")
    ap.add_argument("--modes", default=None, help="Comma list of eager, unfused, compiled, naive. "
                    "Default: eager,compiled on a GPU, eager,naive with --tiny.")
    ap.add_argument("--samples", type=int, default=None, help="Default 768 (--tiny: 24).")
    ap.add_argument("--min-len", type=int, default=None, help="Default 256 (--tiny: 16).")
    ap.add_argument("--max-len", type=int, default=None, help="Default 4096 (--tiny: 160).")
    ap.add_argument("--batch-tokens", type=int, default=65536, help="Padded tokens per batch (eager, compiled).")
    ap.add_argument("--naive-batch-tokens", type=int, default=16384)
    ap.add_argument("--head-chunk", type=int, default=8192, help="Positions per LM-head chunk.")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode of 'compiled' (default: its default).")
    ap.add_argument("--peak-tflops", type=float, default=989.4, help="Peak dense bf16 TFLOP/s (H200: 989.4).")
    ap.add_argument("--device", default=None, help="Default: cuda if present, else cpu.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="Also profile one call of each mode on a GPU: kernel time by kind and the top N kernels.")
    ap.add_argument("--json", default="docs/results/confidence_mfu.json")
    args = ap.parse_args()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    samples = args.samples or (24 if args.tiny else 768)
    lo, hi = args.min_len or (16 if args.tiny else 256), args.max_len or (160 if args.tiny else 4096)
    modes = (args.modes or ("eager,naive" if args.tiny else "eager,compiled")).split(",")

    model = build_model(TINY if args.tiny else QWEN2_05B, device, dtype)
    g = torch.Generator().manual_seed(args.seed)
    lengths = torch.randint(lo, hi + 1, (samples,), generator=g).tolist()
    vocab = model.config.vocab_size
    seqs = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]
    total_flops, counts = flops(model, lengths)
    padded = sum(len(b) * lengths[b[0]] for b in length_batches(lengths, args.batch_tokens))
    n_tokens = sum(lengths)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    print(f"{name}: {n_tokens:,} tokens in {samples} sequences of {lo}-{hi}, padding {padded / n_tokens - 1:.1%}, "
          f"{total_flops / n_tokens / 1e9:.3f} GFLOP/token, dtype {dtype}")

    scorer = ConfidenceScorer(model, 0, args.batch_tokens, args.head_chunk, compile=False)
    unfused = ConfidenceScorer(model, 0, args.batch_tokens, args.head_chunk, compile=False, fused_head=False)
    runners: dict[str, Callable[[], list[list[float]]]] = {
        "eager": lambda: scorer.probs(seqs),
        "unfused": lambda: unfused.probs(seqs),
        "naive": lambda: naive_probs(model, seqs, 0, args.naive_batch_tokens),
    }
    compiled: list[ConfidenceScorer] = []  # built on first use: it compiles the model's layers in place

    def run_compiled() -> list[list[float]]:
        if not compiled:
            compiled.append(ConfidenceScorer(model, 0, args.batch_tokens, args.head_chunk, compile=True,
                                             compile_mode=args.compile_mode))
        return compiled[0].probs(seqs)

    runners["compiled"] = run_compiled
    modes = sorted(modes, key=lambda m: m == "compiled")  # the compiled layers would change the others
    results: dict[str, dict] = {}
    first: list | None = None
    for mode in modes:
        print(f"{mode}:")
        try:
            secs, out, peak = run_mode(runners[mode], device, args.repeats)
        except Exception as e:  # noqa: BLE001 - one failing mode (OOM, compile) must not lose the others
            print(f"  failed: {type(e).__name__}: {e}")
            results[mode] = {"error": f"{type(e).__name__}: {e}"}
            continue
        first = first if first is not None else out
        tflops = total_flops / secs / 1e12
        results[mode] = {"seconds": secs, "tokens_per_s": n_tokens / secs, "tflops": tflops,
                         "mfu": tflops / args.peak_tflops, "peak_gib": peak,
                         "max_abs_diff_p_vs_first": max_diff(out, first)}
        r = results[mode]
        if args.profile and device.type == "cuda":
            r["profile"] = profile_kernels(runners[mode], args.profile)
        print(f"  {r['tokens_per_s']:,.0f} tokens/s  {tflops:.1f} TFLOP/s  MFU {r['mfu']:.1%}  "
              f"peak {peak or 0:.1f} GiB  max |dp| vs {modes[0]} {r['max_abs_diff_p_vs_first']:.2e}")
    report = {
        "device": name, "dtype": str(dtype), "tiny": args.tiny, "tokens": n_tokens, "samples": samples,
        "min_len": lo, "max_len": hi, "padding_share": padded / n_tokens - 1, "batch_tokens": args.batch_tokens,
        "naive_batch_tokens": args.naive_batch_tokens, "head_chunk": args.head_chunk,
        "compile_mode": args.compile_mode,
        "flops_per_token": total_flops / n_tokens, **counts, "peak_tflops": args.peak_tflops,
        "torch": torch.__version__, "transformers": __import__("transformers").__version__,
        "cpus": os.cpu_count(), "modes": results,
    }
    atomic.write_json(Path(args.json), report)


if __name__ == "__main__":
    main()
