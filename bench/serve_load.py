"""Load generator of the serving benchmark: closed-loop clients, the request bodies, the concurrency levels.

Used by `bench/serve_throughput.py`: `drive` sends a level's requests from c clients back to back
(httpx, asyncio) and times each from send to the whole answer; `prompts` and the `*_bodies`
functions build the same requests for each server's API (the seed references in rotation as the
kernel prompt); `run_levels` warms a server up and runs every concurrency level against it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from serve_stats import answer_figures, cell_text, requests_for, summarize

Body = tuple[str, dict[str, Any]]


@dataclass
class LevelResult:
    latencies: list[float] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0


async def _drive(base: str, bodies: Sequence[Body], concurrency: int, timeout_s: float) -> LevelResult:
    import httpx

    result = LevelResult()
    work = iter(enumerate(bodies))
    answers: dict[int, dict[str, Any]] = {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s, limits=limits) as client:

        async def worker() -> None:
            for i, (path, body) in work:
                t0 = time.perf_counter()
                try:
                    r = await client.post(path, json=body)
                except httpx.HTTPError as exc:
                    result.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                    continue
                elapsed = time.perf_counter() - t0
                if r.status_code != 200:
                    result.errors.append(f"{r.status_code}: {r.text[:300]}")
                    continue
                result.latencies.append(elapsed)
                answers[i] = r.json()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.wall_s = time.perf_counter() - start
    result.answers = [answers[i] for i in sorted(answers)]
    return result


def drive(base: str, bodies: Sequence[Body], concurrency: int, timeout_s: float) -> LevelResult:
    return asyncio.run(_drive(base, bodies, concurrency, timeout_s))


def prompts(count: int) -> list[tuple[str, list[dict[str, str]]]]:
    """(reference, kernel prompt messages) for requests 0..count-1: the seed references in rotation."""
    from kernelwright.prompting import prompt_messages
    from kernelwright.seed import load_seed_tasks

    refs = [t.reference for t in load_seed_tasks()]
    return [(refs[i % len(refs)], prompt_messages(refs[i % len(refs)])) for i in range(count)]


def kernel_bodies(items: Sequence[tuple[str, list[dict[str, str]]]], max_new: int, check: bool) -> list[Body]:
    return [("/v1/kernels/generate", {"reference_code": ref, "max_new_tokens": max_new, "temperature": 0,
                                      "compile_check": check, "repair_attempts": 0}) for ref, _ in items]


def mlflow_bodies(items: Sequence[tuple[str, list[dict[str, str]]]], max_new: int, tokenizer: Any) -> list[Body]:
    texts = [str(tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)) for _, m in items]
    return [("/invocations", {"inputs": [t], "params": {"max_new_tokens": max_new, "do_sample": False,
                                                         "return_full_text": False}}) for t in texts]


def chat_bodies(items: Sequence[tuple[str, list[dict[str, str]]]], max_new: int, model: str) -> list[Body]:
    return [("/v1/chat/completions", {"model": model, "messages": m, "max_tokens": max_new, "temperature": 0})
            for _, m in items]


def loadavg() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


@dataclass
class Plan:
    concurrency: list[int]
    requests: int | None
    max_new_tokens: int
    warmup: int
    timeout_s: float


def run_levels(base: str, names: Sequence[str], make: Callable[[str, list[tuple[str, list[dict[str, str]]]]],
               list[Body]], plan: Plan) -> dict[str, Any]:
    """Warm up, then every concurrency level for each of `names` (request builders by name)."""
    report: dict[str, Any] = {name: {"levels": {}} for name in names}
    for name in names:
        warm = drive(base, make(name, prompts(plan.warmup)), min(plan.warmup, 4), plan.timeout_s)
        report[name]["warmup"] = {"requests": plan.warmup, "wall_s": round(warm.wall_s, 3),
                                  "errors": warm.errors[:3]}
    for c in plan.concurrency:
        items = prompts(requests_for(c, plan.requests))
        for name in names:
            load_before = loadavg()
            res = drive(base, make(name, items), c, plan.timeout_s)
            stats = summarize(res.latencies, res.wall_s, len(res.errors))
            stats.update(answer_figures(name, res.answers))
            stats["first_errors"] = res.errors[:3]
            stats["loadavg_before"], stats["loadavg_after"] = load_before, loadavg()
            report[name]["levels"][str(c)] = stats
            print(f"{name:26s} c={c:<3d} n={stats['requests']:<3d} req/s={cell_text(stats['rps'], 3)} "
                  f"p50={cell_text(stats['p50_s'], 3)}s p99={cell_text(stats['p99_s'], 3)}s errors={stats['errors']} "
                  f"load={stats['loadavg_after'][0]}", flush=True)
    return report
