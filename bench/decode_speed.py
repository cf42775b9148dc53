"""How fast the base's shape decodes: milliseconds a generated token with the dynamic cache (what evaluation,
the server and RL use), with the loop stop's check, and with a static cache whose decoding step transformers
compiles on a GPU (`evaluate --static-cache`).

    PYTHONPATH=. python bench/decode_speed.py --json decode_speed.json                    # GPU: the small base
    PYTHONPATH=. python bench/decode_speed.py --size tiny --batch 2 --prompt-len 32 --new-tokens 24 \\
        --reps 1 --json /tmp/decode.json                                                    # CPU smoke test

A random-init model of the preset (nothing downloaded; `--model` takes a trained folder instead), one
batch of random prompts, greedy: every variant makes the same number of steps (`min_new_tokens`; the loop
stop may end rows early, so each figure is wall time over the steps made). The static variant's first
call compiles (its seconds reported apart) and is not timed. Prints ms a step per variant (median over
`--reps`), the ratio to the dynamic cache measured in the same run, and whether the static cache's tokens
equal the dynamic cache's; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, StoppingCriteriaList

from kernelwright.base_model.config import SIZES
from kernelwright.base_model.pretrain import model_config
from kernelwright.generation import LoopStop

VARIANTS = ("dynamic", "dynamic+loop_stop", "static")
PAD, EOS = 0, 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default=None, help="preset (default: small on a GPU, tiny)")
    p.add_argument("--model", type=Path, default=None, help="a trained model folder instead of a random init")
    p.add_argument("--batch", type=int, default=30, help="rows per generate call (evaluation's 30 problems)")
    p.add_argument("--prompt-len", type=int, default=600, help="prompt tokens per row (a kernel problem's ~600)")
    p.add_argument("--new-tokens", type=int, default=512, help="tokens generated per row and call")
    p.add_argument("--reps", type=int, default=3, help="timed calls per variant, interleaved")
    p.add_argument("--json", type=Path, default=Path("decode_speed.json"), help="where to write the results")
    return p.parse_args(argv)


def make_model(a: argparse.Namespace, device: str) -> tuple[Any, int]:
    """The model in evaluation's dtype (bf16 on a GPU), and its vocabulary size."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if a.model is not None:
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, local_files_only=True)
    else:
        preset = SIZES[a.size or ("small" if device == "cuda" else "tiny")]  # as `run` names it
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(model_config(preset, preset.vocab_size, 1, EOS, PAD), dtype=dtype)
    return model.to(device).eval(), int(model.config.vocab_size)


@torch.inference_mode()
def decode(model: Any, ids: torch.Tensor, variant: str, new_tokens: int) -> tuple[torch.Tensor, float]:
    """(the new tokens, seconds) of one greedy generate call."""
    stops = StoppingCriteriaList([LoopStop(ids.shape[1])] if variant == "dynamic+loop_stop" else [])
    cache = {"cache_implementation": "static"} if variant == "static" else {}
    if ids.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                         min_new_tokens=new_tokens, do_sample=False, pad_token_id=PAD, eos_token_id=EOS,
                         stopping_criteria=stops, **cache)
    if ids.is_cuda:
        torch.cuda.synchronize()
    return out[:, ids.shape[1]:], time.perf_counter() - start


def run(a: argparse.Namespace) -> dict[str, Any]:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    preset = a.size or ("small" if device == "cuda" else "tiny")
    model, vocab = make_model(a, device)
    ids = torch.randint(3, vocab, (a.batch, a.prompt_len), generator=torch.Generator().manual_seed(0)).to(device)
    variants, static_error, compile_s = list(VARIANTS), None, None
    try:
        compile_s = decode(model, ids, "static", a.new_tokens)[1]  # the first static call compiles (on a GPU)
    except Exception as exc:  # a transformers whose static cache cannot hold this model: the rest still runs
        variants.remove("static")
        compile_s, static_error = None, f"{type(exc).__name__}: {exc}"[:500]
    decode(model, ids, "dynamic", a.new_tokens)  # warm-up
    times: dict[str, list[float]] = {v: [] for v in variants}
    tokens: dict[str, torch.Tensor] = {}
    for rep in range(a.reps):
        for variant in variants[rep % len(variants):] + variants[:rep % len(variants)]:  # the order rotates
            new, seconds = decode(model, ids, variant, a.new_tokens)
            times[variant].append(1000 * seconds / max(1, new.shape[1]))
            tokens[variant] = new
    base = statistics.median(times["dynamic"])
    same = "static" in tokens and tokens["static"].shape == tokens["dynamic"].shape and bool(
        torch.equal(tokens["static"], tokens["dynamic"]))
    return {
        "what": "ms a generated token (one greedy generate call of batch rows), dynamic vs static KV cache",
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "model": str(a.model) if a.model else f"random init, preset {preset}",
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "dtype": str(next(model.parameters()).dtype), "batch": a.batch, "prompt_len": a.prompt_len,
        "new_tokens": a.new_tokens, "reps": a.reps,
        "ms_per_token": {v: round(statistics.median(t), 3) for v, t in times.items()},
        "ratio_to_dynamic": {v: round(statistics.median(t) / base, 3) for v, t in times.items()},
        "static_first_call_s": None if compile_s is None else round(compile_s, 2),
        "static_same_tokens": same, "static_error": static_error,
    }


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    result = run(a)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{result['device']}, {result['model']}, {result['parameters_m']}M, {result['dtype']}, "
          f"batch {a.batch} x prompt {a.prompt_len}, {a.new_tokens} new tokens")
    for v, ms in result["ms_per_token"].items():
        print(f"  {v:<18} {ms:>9.3f} ms/token  x{result['ratio_to_dynamic'][v]:.3f}")
    if result["static_error"]:
        print(f"static cache failed: {result['static_error']}")
    else:
        print(f"static: first call {result['static_first_call_s']} s (compiles on a GPU), "
              f"same tokens as dynamic: {result['static_same_tokens']}")
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
