"""PNG view of one curated sample: its completion as text, each token's background set by its CuSeT
class and weight, in the colours of the HTML view (heatmap.py).

    kernelwright curate --out DIR        # writes DIR/weights.png (the first sample) beside weights.html

Grey: masked (non-critical boilerplate outside regions; weight 0 or mask_floor); red: inside a
low-confidence sensitive region; blue: CUDA-critical (sensitive) outside a region; orange: another
kept token, white at weight 1.
The deeper the colour, the more the token counts (token weight x sample weight). The first
`max_lines` lines of the completion are drawn, each cut at `max_cols` characters.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelwright import atomic
from kernelwright.curation.heatmap import CLASS_HELP, TOP_WEIGHT, token_class, token_colour

FONT, CHAR_W, LINE_H = 7.0, 4.2, 9.0  # points: DejaVu Sans Mono is 0.6 em wide
HEAD_LINES = 5  # the title and a legend of two rows above the code
LEGEND_WEIGHT = {"masked": 0.0, "region": 1.0, "sensitive": 1.0, "kept": 2.0}  # each class's legend swatch


def _cells(row: dict[str, Any], decode: Callable[[list[int]], str], max_lines: int,
           max_cols: int) -> list[tuple[int, int, str, str]]:
    """(line, column, text, background colour) of every drawn piece of the completion's tokens."""
    out: list[tuple[int, int, str, str]] = []
    line, col = 0, 0
    for i in range(row["prompt_len"], len(row["input_ids"])):
        weight = row["token_weights"][i]
        mask = row["loss_mask"][i] if row.get("loss_mask") is not None else None
        colour = token_colour(token_class(weight, row["region_id"][i], row["sensitive"][i], mask),
                            weight * row["sample_weight"])
        for k, piece in enumerate(decode([row["input_ids"][i]]).replace("\t", "    ").split("\n")):
            if k:
                line, col = line + 1, 0
            if line >= max_lines:
                return out
            if piece and col < max_cols:
                out.append((line, col, piece[: max_cols - col], colour))
            col += len(piece)
    return out


def weight_heatmap_png(row: dict[str, Any], decode: Callable[[list[int]], str], dest: Path,
                       max_lines: int = 90, max_cols: int = 110) -> None:
    """Draw one curated sample's completion, tokens coloured by class and weight, to `dest` (PNG, atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    cells = _cells(row, decode, max_lines, max_cols)
    lines = max((c[0] for c in cells), default=0) + 1
    width, height = max_cols * CHAR_W + 20, (lines + HEAD_LINES) * LINE_H + 20
    fig = plt.figure(figsize=(width / 72, height / 72), dpi=144)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    top = HEAD_LINES * LINE_H
    for line, col, text, colour in cells:
        x, y = 10 + col * CHAR_W, top + line * LINE_H
        ax.add_patch(Rectangle((x, y), len(text) * CHAR_W, LINE_H, color=colour, lw=0))
        ax.text(x, y + LINE_H * 0.8, text, fontsize=FONT, family="DejaVu Sans Mono", color="#222222")
    ax.text(10, 1.6 * LINE_H, f"{row['id']}: sample weight {row['sample_weight']:.3f}, masked "
            f"{row['mask_share']:.1%}, R={row['R']:.3f}", fontsize=8, family="DejaVu Sans")
    handles = [Patch(facecolor=token_colour(c, w), edgecolor="#888888", label=CLASS_HELP[c]) for c, w in
               LEGEND_WEIGHT.items()]
    handles.append(Patch(facecolor="none", edgecolor="none",
                         label=f"deeper: heavier (token x sample weight, up to {TOP_WEIGHT:g})"))
    ax.legend(handles=handles, loc="upper left", fontsize=6, ncol=3, frameon=False,
              bbox_to_anchor=(0, 1 - 2 * LINE_H / height))
    with atomic.atomic_path(dest) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
