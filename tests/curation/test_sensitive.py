"""`mark_sensitive`'s innermost-span pick: the Polars scatter it rests on, the tie order, a brute-force check."""

from __future__ import annotations

import random

import polars as pl

from kernelwright.curation.sensitive import _innermost


def test_polars_scatter_keeps_the_last_write_of_a_repeated_index() -> None:
    """`_innermost` paints spans outermost first and relies on this."""
    s = pl.Series("x", [None] * 4, dtype=pl.UInt32).scatter([1, 2, 1, 1, 3, 2], [5, 6, 7, 8, 9, 0])
    assert s.to_list() == [None, 8, 0, 9]


def _runs(spans: list[tuple[int, int, str]]) -> pl.DataFrame:
    """Spans over rows whose character offsets are their row numbers: a span [s, e) covers rows s..e-1."""
    return pl.DataFrame({"sample": [0] * len(spans), "s_start": [s for s, _, _ in spans],
                         "s_end": [e for _, e, _ in spans], "kind": [k for _, _, k in spans],
                         "_lo": [s for s, _, _ in spans], "_hi": [e for _, e, _ in spans]},
                        schema_overrides={"_lo": pl.UInt32, "_hi": pl.UInt32})


def _kind_per_row(spans: list[tuple[int, int, str]], n_rows: int) -> list[str | None]:
    best, kinds = _innermost(_runs(spans), n_rows)
    return [None if b is None else kinds[b] for b in best.to_list()]


def test_innermost_span_ties_go_to_the_earlier_span_then_the_kind_name() -> None:
    spans = [(0, 6, "launch_config"), (2, 5, "barrier"), (1, 4, "shared_decl"), (2, 5, "atomic")]
    # row 0, 5: the outer span alone; 1-3: the two length-3 spans at 1 and 2, the earlier wins;
    # row 4: [2, 5) twice, the same length and start: "atomic" before "barrier"
    assert _kind_per_row(spans, 7) == ["launch_config", "shared_decl", "shared_decl", "shared_decl", "atomic",
                                       "launch_config", None]


def test_innermost_span_matches_a_brute_force_pick() -> None:
    rng = random.Random(0)
    n_rows = 300
    spans = [(s, s + rng.randint(1, 40), rng.choice(["atomic", "barrier", "thread_index"]))
             for s in (rng.randrange(n_rows - 40) for _ in range(400))]
    expected = [min(((e - s, s, k) for s, e, k in spans if s <= row < e), default=(0, 0, None))[2]
                for row in range(n_rows)]
    assert _kind_per_row(spans, n_rows) == expected
