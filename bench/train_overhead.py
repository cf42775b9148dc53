"""Cost of the CuSeT loss: tokens/s and peak memory of weighting `plain` vs `cuset` in one run.

    PYTHONPATH=. python bench/train_overhead.py --json train_overhead.json          # GPU: Qwen2-0.5B shape, bf16
    PYTHONPATH=. python bench/train_overhead.py --tiny --json /tmp/overhead.json    # CPU smoke test

One random-init model (Qwen2-0.5B's shape from `AutoConfig`, nothing downloaded), one batch of random
tokens with random CuSeT weights, and the real `CusetSFTTrainer.compute_loss` + backward + AdamW step.
The modes alternate (interleaved repetitions, the order rotating each repetition, warm-up steps
excluded): `plain` (all weights 1) and `cuset` (masking, token and sample weights) through our
`compute_loss`, and `trl` (stock `SFTTrainer.compute_loss` on the same batch) as the reference for
what our loss costs over TRL's. Prints tokens/s per mode (median over repetitions), overhead % =
(plain_tps / cuset_tps - 1) * 100 (target <= 3), peak memory per mode (torch.cuda.max_memory_allocated)
and MFU = 6 * N * tokens/s / peak FLOP/s (N: parameters; attention FLOPs not counted).
Needs torch, transformers and trl; not mlflow or polars.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoConfig, AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

from kernelwright.base_model.tokenizer import train_tokenizer
from kernelwright.training.cuset_trainer import CusetCollator, CusetSFTTrainer, checkpointing_args

QWEN2_05B = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                 intermediate_size=4864, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=32768)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=1024, tie_word_embeddings=True, max_position_embeddings=4096)
MODES = ("plain", "cuset", "trl")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny model, small batch, float32 on the CPU (smoke test)")
    p.add_argument("--batch", type=int, default=None, help="sequences per step (default 8; 2 with --tiny)")
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 2048; 128 with --tiny)")
    p.add_argument("--prompt-share", type=float, default=0.3, help="share of each sequence that is prompt (-100)")
    p.add_argument("--keep-share", type=float, default=0.7, help="share of completion tokens cuset keeps (m_t=1)")
    p.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 10; 3 with --tiny)")
    p.add_argument("--steps", type=int, default=None, help="timed optimizer steps per mode per repetition (default 5)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per mode before the first repetition")
    p.add_argument("--peak-tflops", type=float, default=989.4, help="peak dense bf16 TFLOP/s (H200 SXM: 989.4)")
    p.add_argument("--gradient-checkpointing", action="store_true", help="recompute activations in the backward")
    p.add_argument("--json", type=Path, default=Path("train_overhead.json"), help="where to write the results")
    return p.parse_args()


def make_model(tiny: bool, device: str, dtype: torch.dtype) -> torch.nn.Module:
    config = AutoConfig.for_model("qwen2", **(TINY if tiny else QWEN2_05B), bos_token_id=0, eos_token_id=2,
                                  pad_token_id=3)
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype)


def make_examples(batch: int, seq_len: int, vocab: int, prompt_share: float, keep_share: float) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    prompt = int(seq_len * prompt_share)
    out = []
    for i in range(batch):
        ids = torch.randint(10, vocab, (seq_len,), generator=g).tolist()
        keep = (torch.rand(seq_len, generator=g) < keep_share).int()
        keep[:prompt] = 0
        weights = keep.float() * (0.5 + torch.rand(seq_len, generator=g))
        out.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:], "loss_mask": keep.tolist(),
                    "token_weights": weights.tolist(), "sample_weight": 0.5 + i / batch})
    return out


def make_trainer(model, examples: list[dict], on_gpu: bool, checkpointing: bool, out: Path) -> CusetSFTTrainer:
    tok = train_tokenizer(["__global__ void k(float* x) { x[threadIdx.x] = 0; }"] * 4, 300)
    args = SFTConfig(output_dir=str(out), report_to=[], bf16=on_gpu, use_cpu=not on_gpu, save_strategy="no",
                     dataset_kwargs={"skip_prepare_dataset": True}, **checkpointing_args(checkpointing))
    trainer = CusetSFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(examples),
                              processing_class=tok, data_collator=CusetCollator(pad_token_id=3))
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return trainer


def batches(examples: list[dict], device: str) -> dict[str, dict[str, torch.Tensor]]:
    out = {}
    for mode in MODES:
        b = CusetCollator(pad_token_id=3, weighting="plain" if mode == "trl" else mode)(examples)
        if mode == "trl":
            b = {k: v for k, v in b.items() if k in ("input_ids", "attention_mask", "labels")}
        out[mode] = {k: v.to(device) for k, v in b.items()}
    return out


def step(trainer: CusetSFTTrainer, opt: torch.optim.Optimizer, mode: str, batch: dict[str, torch.Tensor]) -> None:
    model = trainer.model
    n = (batch["labels"][:, 1:] != -100).sum()  # what the Trainer passes as num_items_in_batch
    compute = SFTTrainer.compute_loss if mode == "trl" else CusetSFTTrainer.compute_loss
    loss = compute(trainer, model, dict(batch), num_items_in_batch=n)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def sync(on_gpu: bool) -> None:
    if on_gpu:
        torch.cuda.synchronize()


def main() -> None:
    a = parse_args()
    on_gpu = torch.cuda.is_available() and not a.tiny
    device, dtype = ("cuda", torch.bfloat16) if on_gpu else ("cpu", torch.float32)
    batch_size, seq_len = a.batch or (2 if a.tiny else 8), a.seq_len or (128 if a.tiny else 2048)
    reps, steps = a.reps or (3 if a.tiny else 10), a.steps or (2 if a.tiny else 5)
    model = make_model(a.tiny, device, dtype)
    n_params = sum(p.numel() for p in model.parameters())
    examples = make_examples(batch_size, seq_len, model.config.vocab_size, a.prompt_share, a.keep_share)
    trainer = make_trainer(model, examples, on_gpu, a.gradient_checkpointing, Path("/tmp/kw-train-overhead"))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=on_gpu)
    data = batches(examples, device)
    tokens = int(data["plain"]["attention_mask"].sum())
    for mode in MODES:
        for _ in range(a.warmup):
            step(trainer, opt, mode, data[mode])
    sync(on_gpu)
    tps: dict[str, list[float]] = {m: [] for m in MODES}
    peak: dict[str, int] = dict.fromkeys(MODES, 0)
    for rep in range(reps):
        for mode in MODES[rep % len(MODES):] + MODES[:rep % len(MODES)]:
            if on_gpu:
                torch.cuda.reset_peak_memory_stats()
            sync(on_gpu)
            t0 = time.perf_counter()
            for _ in range(steps):
                step(trainer, opt, mode, data[mode])
            sync(on_gpu)
            tps[mode].append(steps * tokens / (time.perf_counter() - t0))
            if on_gpu:
                peak[mode] = max(peak[mode], torch.cuda.max_memory_allocated())
    result = report(a, tps, peak, n_params, tokens, batch_size, seq_len, device, dtype)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {a.json}")


def report(a, tps, peak, n_params, tokens, batch_size, seq_len, device, dtype) -> dict:
    med = {m: statistics.median(v) for m, v in tps.items()}
    peak_flops = a.peak_tflops * 1e12
    rows = {m: {"tokens_per_s": med[m], "tokens_per_s_all": tps[m],
                "peak_mem_gib": peak[m] / 2**30 if device == "cuda" else None,
                "mfu": 6 * n_params * med[m] / peak_flops} for m in MODES}
    overhead = (med["plain"] / med["cuset"] - 1) * 100
    vs_trl = (med["trl"] / med["cuset"] - 1) * 100
    gpu = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"{gpu}, {dtype}, {n_params / 1e6:.1f}M params, batch {batch_size} x {seq_len} = {tokens} tokens/step")
    for m, r in rows.items():
        mem = "n/a (CPU)" if r["peak_mem_gib"] is None else f"{r['peak_mem_gib']:.2f} GiB"
        print(f"  {m:<6} {r['tokens_per_s']:>12,.0f} tok/s  peak {mem}  MFU {r['mfu']:.3f}"
              f"  (reps: {', '.join(f'{x:,.0f}' for x in tps[m])})")
    print(f"overhead of cuset over plain: {overhead:+.2f} % (target <= 3 %); cuset over stock TRL: {vs_trl:+.2f} %")
    return {"device": gpu, "dtype": str(dtype), "params": n_params, "batch": batch_size, "seq_len": seq_len,
            "tokens_per_step": tokens, "reps": len(tps["plain"]), "peak_tflops": a.peak_tflops, "modes": rows,
            "overhead_pct": overhead, "overhead_vs_trl_pct": vs_trl,
            "gradient_checkpointing": a.gradient_checkpointing, "tiny": a.tiny}


if __name__ == "__main__":
    main()
