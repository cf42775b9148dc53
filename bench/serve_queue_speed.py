"""How fast the server's sequential queue answers waves of requests: dynamic vs static KV cache (`kv_cache`).

    PYTHONPATH=. python bench/serve_queue_speed.py --json serve_queue_speed.json            # GPU: the small base
    PYTHONPATH=. python bench/serve_queue_speed.py --size tiny --waves 3,2 --prompt-len 32 \\
        --budgets 8,24 --reps 1 --json /tmp/queue.json                                       # CPU smoke test

A random-init model of the preset (`--model` takes a trained folder instead) behind the server's own
generation queue (serving/generate_queue.py), greedy, nothing ending a row but its budget. A wave is
`n` requests of random prompts (lengths up to --prompt-len) and budgets drawn from --budgets, made to
wait together, so they share generate calls as a server's burst would. Every wave size is first run once
per variant untimed (the static cache compiles a shape there; its seconds reported apart), then
`--reps` rounds of all waves, the variants' order rotating. Prints new tokens a second and seconds a
wave per variant, the static cache's ratio to the dynamic one measured in the same run, and the share
of rows whose tokens the two caches agree on; writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_speed import PAD, make_model  # noqa: E402

from kernelwright.base_model.config import SIZES  # noqa: E402
from kernelwright.serving.backend import Sampling  # noqa: E402
from kernelwright.serving.generate_queue import GenerateQueue, Job  # noqa: E402

VARIANTS = ("dynamic", "static")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default=None, help="preset (default: small on a GPU, tiny)")
    p.add_argument("--model", type=Path, default=None, help="a trained model folder instead of a random init")
    p.add_argument("--waves", default="8,3,16", help="requests per wave, comma-separated")
    p.add_argument("--prompt-len", type=int, default=800, help="longest prompt, tokens (each drawn from half to it)")
    p.add_argument("--budgets", default="256,512,1024", help="max_new_tokens a request draws from")
    p.add_argument("--max-batch-sequences", type=int, default=16, help="the server's max_batch_sequences")
    p.add_argument("--reps", type=int, default=2, help="timed rounds of every wave")
    p.add_argument("--json", type=Path, default=Path("serve_queue_speed.json"), help="where to write the results")
    return p.parse_args(argv)


def make_waves(a: argparse.Namespace, vocab: int) -> list[list[tuple[list[int], int]]]:
    """Per wave, each request's prompt token ids and budget (the same for every variant)."""
    rng = random.Random(0)
    budgets = [int(b) for b in a.budgets.split(",")]
    waves = []
    for size in (int(n) for n in a.waves.split(",")):
        waves.append([([rng.randrange(3, vocab) for _ in range(rng.randint(max(1, a.prompt_len // 2), a.prompt_len))],
                       rng.choice(budgets)) for _ in range(size)])
    return waves


async def _wave(queue: GenerateQueue, wave: list[tuple[list[int], int]]) -> tuple[list[list[int]], float]:
    """Every request's tokens, and the seconds from the first submission to the last answer."""
    loop = asyncio.get_running_loop()
    jobs = [Job([ids], Sampling(max_new_tokens=budget), False, loop) for ids, budget in wave]
    start = time.perf_counter()
    with queue._cond:  # the worker takes nothing until the whole wave waits
        for job in jobs:
            queue.submit(job)
    rows = [(await job.result())[0] for job in jobs]
    return rows, time.perf_counter() - start


def preset_for(device: str) -> str:
    return "small" if device == "cuda" else "tiny"


def run(a: argparse.Namespace) -> dict[str, Any]:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, vocab = make_model(a, device)
    waves = make_waves(a, vocab)
    queues = {v: GenerateQueue(model, None, PAD, a.max_batch_sequences, stop_loops=False,
                               static_cache=v == "static") for v in VARIANTS}
    first_s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    wave_s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    tokens: dict[str, list[list[int]]] = {v: [] for v in VARIANTS}
    try:
        for v in VARIANTS:  # the first run of each wave size: compiles for the static cache
            first_s[v] = [asyncio.run(_wave(queues[v], w))[1] for w in waves]
        for rep in range(a.reps):
            for v in VARIANTS[rep % 2:] + VARIANTS[:rep % 2]:
                for w in waves:
                    rows, seconds = asyncio.run(_wave(queues[v], w))
                    wave_s[v].append(seconds)
                    if rep == 0:
                        tokens[v] += rows
    finally:
        for q in queues.values():
            q.close()
    made = sum(budget for w in waves for _, budget in w) * a.reps
    per_s = {v: made / sum(wave_s[v]) for v in VARIANTS}
    same = sum(x == y for x, y in zip(tokens["dynamic"], tokens["static"], strict=True))
    return {
        "what": "new tokens a second through the server's sequential queue, waves of requests, dynamic vs static "
                "KV cache",
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "model": str(a.model) if a.model else f"random init, preset {a.size or preset_for(device)}",
        "dtype": str(next(model.parameters()).dtype), "waves": a.waves, "prompt_len": a.prompt_len,
        "budgets": a.budgets, "max_batch_sequences": a.max_batch_sequences, "reps": a.reps,
        "tokens_per_s": {v: round(per_s[v], 1) for v in VARIANTS},
        "ratio_to_dynamic": round(per_s["static"] / per_s["dynamic"], 3),
        "median_wave_s": {v: round(statistics.median(wave_s[v]), 3) for v in VARIANTS},
        "first_wave_s": {v: [round(s, 2) for s in first_s[v]] for v in VARIANTS},
        "rows_same_tokens": f"{same}/{len(tokens['dynamic'])}",
    }


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    result = run(a)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{result['device']}, {result['model']}, {result['dtype']}, waves {a.waves}, budgets {a.budgets}")
    for v in VARIANTS:
        print(f"  {v:<8} {result['tokens_per_s'][v]:>9.1f} tokens/s, median wave {result['median_wave_s'][v]} s, "
              f"first waves {result['first_wave_s'][v]} s")
    print(f"static / dynamic: x{result['ratio_to_dynamic']}; rows with the same tokens: {result['rows_same_tokens']}")
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
