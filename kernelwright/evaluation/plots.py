"""Plots saved as PNG and logged to MLflow (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernelwright.atomic import atomic_path  # noqa: E402


def _save(fig: plt.Figure, dest: Path) -> Path:
    fig.tight_layout()
    with atomic_path(dest) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return dest


def speedup_distribution(speedups: list[float], fast_p: dict[float, float], dest: Path) -> Path:
    """Left: histogram of the correct samples' speedups (log2 axis); right: the fast_p curve."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    if speedups:
        left.hist(speedups, bins=np.logspace(np.log2(min(speedups)) - 0.1, np.log2(max(speedups)) + 0.1,
                                             20, base=2.0), color="#3b7dd8")
        left.set_xscale("log", base=2)
    left.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    left.set_xlabel("speedup over the PyTorch reference")
    left.set_ylabel("correct samples")
    left.set_title(f"speedup distribution (n={len(speedups)})")
    ps = sorted(fast_p)
    right.plot(ps, [fast_p[p] for p in ps], marker="o", color="#d8663b")
    right.set_xlabel("p")
    right.set_ylabel("fast_p")
    right.set_ylim(0, 1)
    right.set_title("fast_p: correct and faster than p x")
    return _save(fig, dest)


def category_groups(values: dict[str, dict[str, float]], keys: list[str], title: str, dest: Path) -> Path:
    """Grouped bars: for each category, one bar per figure in `keys` (rates in [0, 1])."""
    cats = sorted(values)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(cats) + 2), 3.8))
    width = 0.8 / max(len(keys), 1)
    for j, key in enumerate(keys):
        xs = [i + j * width for i in range(len(cats))]
        ax.bar(xs, [values[c].get(key, 0.0) for c in cats], width=width, label=key)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cats))], cats, rotation=45, ha="right")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, dest)
