"""HTML view of curated samples: completion tokens coloured by CuSeT weight, regions outlined."""

from __future__ import annotations

import html

import polars as pl

STYLE = """
body{font-family:sans-serif;margin:1.5em} pre{font-family:monospace;font-size:12px;line-height:1.5;
white-space:pre-wrap;border:1px solid #ccc;padding:.8em} .m{background:#ddd;color:#888}
.r{outline:1.5px solid #d00;outline-offset:-1px} .s{text-decoration:underline dotted #06c}
.legend span{padding:0 .5em;margin-right:.5em}
"""


def _colour(weight: float, wmax: float) -> str:
    """White at weight 1, toward orange above it; masked tokens get the .m class instead."""
    if weight <= 1.0 or wmax <= 1.0:
        return "#ffffff"
    x = min((weight - 1.0) / (wmax - 1.0), 1.0)
    return f"rgb(255,{int(255 - 120 * x)},{int(255 - 200 * x)})"


def _token_spans(ids: list[int], decode, weights: list[float], regions: list, sensitive: list[bool],
                 start: int, sample_weight: float) -> str:
    wmax = max([w * sample_weight for w in weights[start:]] + [1.0])
    parts = []
    for i in range(start, len(ids)):
        text = html.escape(decode([ids[i]]))
        w = weights[i] * sample_weight
        cls = ["m"] if weights[i] == 0 else []
        cls += ["r"] if regions[i] is not None else []
        cls += ["s"] if sensitive[i] else []
        parts.append(f'<span class="{" ".join(cls)}" style="background:{_colour(w, wmax)}" '
                     f'title="w={w:.3f}">{text}</span>')
    return "".join(parts)


def weight_heatmap_html(data: pl.DataFrame, decode=None) -> str:
    """One <pre> per sample. `decode` maps token ids to text (default: show the ids)."""
    decode = decode or (lambda ids: f"[{ids[0]}]")
    body = []
    for row in data.iter_rows(named=True):
        pre = _token_spans(row["input_ids"], decode, row["token_weights"], row["region_id"], row["sensitive"],
                           row["prompt_len"], row["sample_weight"])
        body.append(f"<h3>{html.escape(row['id'])} (sample weight {row['sample_weight']:.3f}, "
                    f"R={row['R']:.3f}, masked {row['mask_share']:.1%})</h3><pre>{pre}</pre>")
    legend = ('<p class="legend"><span class="m">masked (weight 0)</span><span class="r">low-confidence '
              'sensitive region</span><span class="s">CUDA-critical span</span> background: token weight '
              'x sample weight</p>')
    return f"<html><head><meta charset='utf-8'><style>{STYLE}</style></head><body><h2>CuSeT token weights</h2>" \
           f"{legend}{''.join(body)}</body></html>"
