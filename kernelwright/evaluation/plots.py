"""Plots saved as PNG and logged to MLflow (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

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
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_title(f"speedup distribution (n={len(speedups)})")
    ps = sorted(fast_p)
    right.plot(ps, [fast_p[p] for p in ps], marker="o", color="#d8663b")
    right.set_xlabel("p")
    right.set_ylabel("fast_p")
    right.set_ylim(0, 1)
    right.set_title("fast_p: correct and faster than p x")
    return _save(fig, dest)


def category_groups(values: dict[str, dict[str, float]], keys: list[str], title: str, dest: Path,
                    samples: dict[str, int] | None = None) -> Path:
    """Grouped bars: for each category, one bar per figure in `keys` (rates in [0, 1]).

    Every bar carries its value, so a rate of 0 reads as 0 rather than as a missing bar; with
    `samples`, each category's label says how many samples it holds.
    """
    cats = sorted(values)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(cats) + 2), 4.0))
    width = 0.8 / max(len(keys), 1)
    for j, key in enumerate(keys):
        xs = [i + j * width for i in range(len(cats))]
        heights = [values[c].get(key, 0.0) for c in cats]
        bars = ax.bar(xs, heights, width=width, label=key)
        ax.bar_label(bars, labels=[f"{h:.2g}" for h in heights], fontsize=7, padding=1)
    labels = [f"{c} (n={samples[c]})" if samples and c in samples else c for c in cats]
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cats))], labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylim(0, 1.12)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("share of samples")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, dest)
