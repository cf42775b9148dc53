"""The ablation table's figure (bench/cuset_ablation.py --png): a panel per suite and kind of figure (the
NLL rows on a log axis, since the masked tokens sit two orders of magnitude above the rest; rates from
0), per figure a bar per mode at its mean over seeds and a dot per seed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLOURS = {"plain": "#9bb7d4", "region": "#a8d5a2", "cuset": "#e0a36f", "cusetSoft": "#f2d28b",
           "cusetA": "#c9a0dc"}


def plot_panels(parts: list[tuple[str, bool, list[Any]]], all_modes: list[str], dest: Path,
                titles: dict[str, str]) -> Path:
    """A panel per suite and kind (NLL on a log axis, rates from 0): per figure, a bar per mode at its mean
    over seeds, each seed a dot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    widest = max(len(part) for _, _, part in parts)
    fig, axes = plt.subplots(len(parts), 1, figsize=(max(6.0, 0.9 * widest + 1.5), 3.2 * len(parts) + 0.4),
                             squeeze=False)
    for ax, (suite, nll, part) in zip(axes[:, 0], parts, strict=True):
        here = [m for m in all_modes if any(m in r.cells for r in part)]
        width = 0.8 / len(here)
        for j, mode in enumerate(here):
            xs = [i + (j - (len(here) - 1) / 2) * width for i in range(len(part))]
            cells = [r.cells.get(mode) for r in part]
            ax.bar([x for x, c in zip(xs, cells, strict=True) if c is not None and c.mean is not None],
                   [c.mean for c in cells if c is not None and c.mean is not None], width=width * 0.9,
                   color=COLOURS.get(mode, "#bbbbbb"), edgecolor="#555555", linewidth=0.4)
            for x, c in zip(xs, cells, strict=True):
                if c is not None:
                    ax.scatter([x] * len(c.values), list(c.values.values()), color="black", s=8, zorder=3)
        values = [v for r in part for c in r.cells.values() for v in c.values.values()]
        if nll and min(values, default=0.0) > 0:
            ax.set_yscale("log")
        else:  # from 0, so that all-zero figures read as zero
            ax.set_ylim(0.0, max(0.1, 1.1 * max(values, default=0.0)))
        labels = [r.figure.removeprefix("infill.") for r in part]
        ax.set_xticks(range(len(part)), labels, rotation=35 if len(part) > 4 else 0, ha="right" if len(part) > 4
                      else "center", fontsize=7)
        ax.set_xlim(-0.6, max(len(part), 3) - 0.4)
        ax.tick_params(axis="y", labelsize=7)
        what = "NLL per token, lower better (log scale)" if nll else "rates"
        ax.set_title(f"{suite}: {titles.get(suite, suite)}, {what}", fontsize=9)
    handles = [Patch(facecolor=COLOURS.get(m, "#bbbbbb"), edgecolor="#555555", label=m) for m in all_modes]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.985 - 0.25 / fig.get_figheight()),
               ncols=len(all_modes), fontsize=8, frameon=False)
    fig.suptitle("training modes per held-out suite: bar = mean over seeds, dots = seeds", fontsize=9, y=0.995)
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - 0.55 / fig.get_figheight()))
    dest.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dest, dpi=110)
    plt.close(fig)
    return dest
