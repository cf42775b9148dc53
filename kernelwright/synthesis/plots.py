"""The synthesize run's figure: the timed pairs' speedups per family (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import polars as pl

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernelwright.atomic import atomic_path  # noqa: E402


def speedup_figure(timed: pl.DataFrame, dest: Path) -> Path:
    """One box per family of the timed pairs' speedups over the PyTorch reference (log2 axis),
    each box's pair count under its name."""
    families = sorted(set(timed["family"].to_list()))
    data = [timed.filter(pl.col("family") == f)["speedup"].to_numpy() for f in families]
    fig, ax = plt.subplots(figsize=(1.6 * max(len(families), 3) + 1.5, 4))
    ax.boxplot(data, showfliers=True)
    ax.set_xticks(range(1, len(families) + 1), [f"{f}\n(n={len(d)})" for f, d in zip(families, data, strict=True)])
    ax.set_yscale("log", base=2)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_ylabel("speedup over the PyTorch reference")
    all_values = np.concatenate(data) if data else np.array([])
    ax.set_title(f"generator solutions, timed pairs (n={all_values.size}, "
                 f"median {float(np.median(all_values)) if all_values.size else float('nan'):.2f}x)")
    fig.tight_layout()
    with atomic_path(dest) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return dest
