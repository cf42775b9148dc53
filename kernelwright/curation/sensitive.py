"""c_t: which tokens are CUDA-critical, from the character spans `kernelwright.cuda.spans` finds.

`mark_sensitive` gives every token row c (it overlaps a span) and span_kind (the innermost
span's kind), without a join or a group-by: two binary searches find the run of rows each span
overlaps, and one scatter paints the runs onto the rows outermost first.
"""

from __future__ import annotations

import polars as pl

from kernelwright.curation.weights import KEY_BASE, sample_key, sorted_by_sample_pos


def mark_sensitive(tokens: pl.LazyFrame, spans: pl.LazyFrame, *, in_order: bool = False) -> pl.LazyFrame:
    """c_t and span_kind: a token is sensitive where its characters overlap a span.

    Where spans nest, the token takes the kind of the innermost (shortest) span; equal lengths:
    the earlier span, then the kind's name. Rows come back sorted by (sample, pos). `in_order`:
    they already come in that order (`samples._token_frame` builds them so), so they are not checked.

    Within a sample, token offsets grow with pos, so the tokens a span [s, e) overlaps are one run
    of rows (`_span_runs`); `_innermost` picks each row's span. No join and no group-by.
    """
    t = sorted_by_sample_pos(tokens.collect(), in_order=in_order)
    best, kinds = _innermost(_span_runs(_row_keys(t), spans.collect()), t.height)
    return t.with_columns(kinds.gather(best).alias("span_kind"), c=best.is_not_null()).lazy()


def _row_keys(t: pl.DataFrame) -> pl.DataFrame:
    """Per row sample * KEY_BASE + tok_end (_e) and + tok_start (_s), prompt rows without offsets
    at -1; one lazy select, the two side by side."""
    return t.lazy().select(
        _e=sample_key(pl.col("tok_end").fill_null(-1)),
        _s=sample_key(pl.col("tok_start").fill_null(-1)),
    ).collect()


def _span_runs(keys: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """`spans` with the run of rows [_lo, _hi) each overlaps; spans that overlap no token dropped.

    A run goes from the first row with tok_end > s to the first with tok_start >= e: two binary
    searches in the rows' keys (`_row_keys`), evaluated side by side. Runs come back in the order
    of their first rows.
    """
    start = sample_key(pl.col("s_start"))
    return spans.sort(start).with_columns(  # queries in order: the searches stay in cache
        _lo=pl.lit(keys["_e"]).search_sorted(start, side="right"),
        _hi=pl.lit(keys["_s"]).search_sorted(sample_key(pl.col("s_end")), side="left"),
    ).filter(pl.col("_lo") < pl.col("_hi"))


def _innermost(runs: pl.DataFrame, n_rows: int) -> tuple[pl.Series, pl.Series]:
    """(best, kinds): per row the place in `kinds` of its innermost span (null: in none), and the
    spans' kinds innermost first (length, start, kind).

    The runs are painted onto the rows outermost first, each (row, span) pair one write of the
    span's place: a row ends up holding its innermost span's. One expansion and one scatter, no
    sort of the pairs. It rests on `Series.scatter` writing repeated indices in order (the last
    write stays), which tests/curation/test_sensitive.py checks on the installed Polars.
    """
    length = pl.col("s_end") - pl.col("s_start")
    order = runs.select(pl.arg_sort_by(length * KEY_BASE + pl.col("s_start"), "kind")).to_series()
    outer_first = runs.select("_lo", "_hi")[order.reverse()].with_columns(
        _o=pl.int_range(pl.len(), 0, -1, dtype=pl.UInt32) - 1)  # place in `kinds`: len - 1 down to 0
    pairs = outer_first.select(_g=pl.int_ranges("_lo", "_hi", dtype=pl.UInt32), _o="_o").explode("_g")
    # null, not a sentinel one past the kinds, where a row is in no span: `kinds` stays one chunk
    # (a gather from several is ~2x slower) and c is the null mask
    best = pl.Series("_o", [], dtype=pl.UInt32).extend_constant(None, n_rows).scatter(pairs["_g"], pairs["_o"])
    return best, runs["kind"].gather(order)
