"""Plots saved as PNG and logged to MLflow (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernelwright.atomic import atomic_path  # noqa: E402


def category_bars(values: dict[str, float], title: str, dest: Path) -> Path:
    """One bar per category (values in [0, 1])."""
    cats = sorted(values)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(cats) + 2), 3.5))
    ax.bar(cats, [values[c] for c in cats], color="#3b7dd8")
    ax.set_ylim(0, 1)
    ax.set_ylabel("rate")
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    with atomic_path(dest) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return dest
