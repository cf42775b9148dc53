"""Statistics of the serving benchmark: percentiles, level summaries, the ratio table, per-answer figures.

Pure functions of `bench/serve_throughput.py` (tested in tests/bench/test_serve.py): the names of
the servers compared and the ratios reported, requests/s and latency percentiles of a concurrency
level, the kernelwright/baseline ratios and the printed table, and the token counts and server
timings read from the answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

KW_ON, KW_OFF, MLFLOW, TF_SERVE = "kernelwright_compile_on", "kernelwright_compile_off", "mlflow", "transformers_serve"
SERVERS = (KW_ON, KW_OFF, MLFLOW, TF_SERVE)
RATIOS = ((KW_ON, MLFLOW), (KW_OFF, MLFLOW), (KW_ON, TF_SERVE), (KW_OFF, TF_SERVE))
SHORT = {KW_ON: "kw(on)", KW_OFF: "kw(off)", MLFLOW: "mlflow", TF_SERVE: "tf-serve"}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0 and 100, not {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(latencies: Sequence[float], wall_s: float, errors: int = 0) -> dict[str, Any]:
    """Requests/s (answered requests over the wall time) and latency percentiles of one level."""
    ok = len(latencies)
    stats: dict[str, Any] = {"requests": ok + errors, "ok": ok, "errors": errors, "wall_s": round(wall_s, 4),
                             "rps": round(ok / wall_s, 4) if wall_s > 0 and ok else None}
    for name, q in (("p50_s", 50), ("p90_s", 90), ("p99_s", 99)):
        stats[name] = round(percentile(latencies, q), 4) if ok else None
    stats["mean_s"] = round(sum(latencies) / ok, 4) if ok else None
    return stats


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator rounded to 2 places; None when either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 2)


def ratio_rows(levels: dict[str, dict[int, dict[str, Any]]], concurrencies: Sequence[int]) -> list[dict[str, Any]]:
    """One row per concurrency: each server's requests/s and the kernelwright/baseline ratios.

    `levels[server][concurrency]` is a `summarize` dict; a missing server or level gives None."""
    rows = []
    for c in concurrencies:
        rps = {name: levels.get(name, {}).get(c, {}).get("rps") for name in SERVERS}
        row: dict[str, Any] = {"concurrency": c, **{f"{name}_rps": rps[name] for name in SERVERS}}
        for num, den in RATIOS:
            row[f"{num}/{den}"] = ratio(rps[num], rps[den])
        rows.append(row)
    return rows


def cell_text(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def format_table(rows: Sequence[dict[str, Any]], levels: dict[str, dict[int, dict[str, Any]]]) -> str:
    """The printed table: per concurrency, each server's req/s (p50/p99 s), then the ratios."""
    head = ["c", *(f"{SHORT[s]} req/s (p50/p99 s)" for s in SERVERS),
            *(f"{SHORT[n]}/{SHORT[d]}" for n, d in RATIOS)]
    lines = [head]
    for row in rows:
        c = row["concurrency"]
        cells = [str(c)]
        for name in SERVERS:
            stats = levels.get(name, {}).get(c)
            if not stats or stats.get("rps") is None:
                cells.append("-")
                continue
            cells.append(f"{stats['rps']:.2f} ({stats['p50_s']:.2f}/{stats['p99_s']:.2f})")
        cells += [cell_text(row[f"{n}/{d}"], suffix="x") for n, d in RATIOS]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in lines)


def requests_for(concurrency: int, requests: int | None) -> int:
    """Requests at one level: --requests when given, else 32 or two rounds of the clients if more."""
    return requests if requests else max(32, 2 * concurrency)


def answer_figures(name: str, answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Tokens per answer as each server reports them, and kernelwright's own generate and compile times."""
    out: dict[str, Any] = {}
    if name in (KW_ON, KW_OFF, TF_SERVE):
        tokens = [a.get("usage", {}).get("completion_tokens") for a in answers]
        prompt = [a.get("usage", {}).get("prompt_tokens") for a in answers]
        out["completion_tokens_mean"] = _mean(tokens)
        out["prompt_tokens_mean"] = _mean(prompt)
    if name == MLFLOW:
        # /invocations reports no token counts, and its text comes back stripped (the random model's greedy
        # tokens are mostly whitespace): the same greedy model on the same prompts is counted by the others
        out["prediction_chars_mean"] = _mean([len(p) for a in answers for p in a.get("predictions", [])])
    if name in (KW_ON, KW_OFF):
        compile_s = [a.get("timings", {}).get("compile_s") for a in answers]
        generate_s = [a.get("timings", {}).get("generate_s") for a in answers]
        out["server_compile_s_p50"] = _p50(compile_s)
        out["server_generate_s_p50"] = _p50(generate_s)
        statuses = sorted({c["compile"]["device"]["status"] for a in answers for c in a.get("candidates", [])
                           if c.get("compile")})
        out["compile_device_statuses"] = statuses
    return out


def _mean(values: Sequence[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, int | float)]
    return round(sum(nums) / len(nums), 2) if nums else None


def _p50(values: Sequence[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, int | float)]
    return round(percentile(nums, 50), 4) if nums else None
