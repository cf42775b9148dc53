"""HTML view of curated samples: each completion token coloured by its CuSeT class and weight.

    kernelwright curate --out DIR        # writes DIR/weights.html (the first four samples)

The hue says what CuSeT made of the token: grey masked (non-critical boilerplate outside every region:
the uncertain or the confident kind, as `mask_target` chose; weight 0, or `mask_floor`), red
inside a low-confidence sensitive region, blue CUDA-critical (sensitive) outside a region, orange
any other kept token. The depth says how much the token counts in the loss, its token weight times
its sample's weight, on one scale for every sample: a kept token of weight 1 stays white, so only
what CuSeT singles out is coloured. CUDA-critical tokens are also underlined; hovering a token
shows its class and weight. The PNG view (heatmap_png.py) uses the same colours.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import polars as pl

from kernelwright.curation.weights import CusetParams

TOP_WEIGHT = CusetParams().w_max  # the deepest colour: the largest sample weight CuSeT gives by default
HUES = {"masked": (150, 150, 150), "region": (214, 39, 40), "sensitive": (31, 119, 180), "kept": (255, 127, 14)}
CLASS_HELP = {
    "masked": "masked (non-critical, outside regions; weight 0 or mask_floor)",
    "region": "low-confidence sensitive region",
    "sensitive": "CUDA-critical, outside a region",
    "kept": "other kept tokens (white at weight 1)",
}
LEGEND_WEIGHTS = (0.5, 1.0, 2.0, 3.0)
STYLE = """
body{font-family:sans-serif;margin:1.5em} pre{font-family:monospace;font-size:12px;line-height:1.5;
white-space:pre-wrap;border:1px solid #ccc;padding:.8em} .m{color:#666} .s{text-decoration:underline dotted #06c}
table.legend{border-collapse:collapse;font-size:13px;margin-bottom:1em} table.legend td{padding:2px 8px}
table.legend td.w{font-family:monospace;border:1px solid #ccc;text-align:center}
"""


def token_class(weight: float, region: Any, sensitive: bool, mask: float | None = None) -> str:
    """masked, region, sensitive or kept: what CuSeT made of a completion token.

    `mask` is the token's loss_mask m_t: below 1 it is masked (0, or the soft mask_floor). Without it
    (data that lacks the column) a token of weight 0 counts as masked.
    """
    if (weight == 0) if mask is None else (mask < 1):
        return "masked"
    if region is not None:
        return "region"
    return "sensitive" if sensitive else "kept"


def _strength(cls: str, weight: float) -> float:
    """How far from white (0-1): fixed for masked tokens; for the others it grows with the weight,
    kept tokens starting from white at weight 1, the singled-out classes always visible."""
    if cls == "masked":
        return 0.45
    if cls == "kept":
        return 0.75 * min(max((weight - 1.0) / (TOP_WEIGHT - 1.0), 0.0), 1.0)
    return 0.25 + 0.6 * min(max(weight / TOP_WEIGHT, 0.0), 1.0)


def token_colour(cls: str, weight: float) -> str:
    """#rrggbb of a token of class `cls` whose weight (token weight x sample weight) is `weight`."""
    s = _strength(cls, weight)
    return "#" + "".join(f"{round(255 - s * (255 - c)):02x}" for c in HUES[cls])


def _token_spans(ids: list[int], decode: Callable[[list[int]], str], weights: list[float], regions: list[Any],
                 sensitive: list[bool], start: int, sample_weight: float, masks: list[float] | None = None) -> str:
    parts = []
    for i in range(start, len(ids)):
        w = weights[i] * sample_weight
        cls = token_class(weights[i], regions[i], sensitive[i], None if masks is None else masks[i])
        css = " ".join(c for c, on in (("m", cls == "masked"), ("s", sensitive[i])) if on)
        parts.append(f'<span class="{css}" style="background:{token_colour(cls, w)}" title="{cls}, w={w:.3f}">'
                     f"{html.escape(decode([ids[i]]))}</span>")
    return "".join(parts)


def legend_html() -> str:
    """A table: one row per class, its colour at a few weights."""
    head = "".join(f"<td>{w:g}</td>" for w in LEGEND_WEIGHTS)
    rows = [f"<tr><td>weight</td>{head}</tr>"]
    for cls, help_text in CLASS_HELP.items():
        weights = (0.0,) if cls == "masked" else LEGEND_WEIGHTS
        cells = "".join(f'<td class="w" style="background:{token_colour(cls, w)}">&nbsp;</td>' for w in weights)
        rows.append(f"<tr><td>{html.escape(help_text)}</td>{cells}</tr>")
    return (f'<table class="legend">{"".join(rows)}</table><p>Colour depth: token weight x sample weight (deepest '
            f'at {TOP_WEIGHT:g}). <span class="s">Underlined</span>: CUDA-critical. Hover a token for its weight.</p>')


def weight_heatmap_html(data: pl.DataFrame, decode: Callable[[list[int]], str] | None = None) -> str:
    """One <pre> per sample. `decode` maps token ids to text (default: show the ids)."""
    decode = decode or (lambda ids: f"[{ids[0]}]")
    body = []
    for row in data.iter_rows(named=True):
        pre = _token_spans(row["input_ids"], decode, row["token_weights"], row["region_id"], row["sensitive"],
                           row["prompt_len"], row["sample_weight"], row.get("loss_mask"))
        body.append(f"<h3>{html.escape(row['id'])} (sample weight {row['sample_weight']:.3f}, "
                    f"R={row['R']:.3f}, masked {row['mask_share']:.1%})</h3><pre>{pre}</pre>")
    return f"<html><head><meta charset='utf-8'><style>{STYLE}</style></head><body><h2>CuSeT token weights</h2>" \
           f"{legend_html()}{''.join(body)}</body></html>"
