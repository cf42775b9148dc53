"""A test beside the ablation table's spread rule: how likely a rate difference this large is by chance.

    from ablation_stats import pooled_fisher_p
    pooled_fisher_p({0: 0.4, 1: 0.2}, {0: 30, 1: 30}, {0: 0.2, 1: 0.1}, {0: 30, 1: 30})   # -> 0.079

The spread rule (cuset_ablation.judge) asks every seed of a mode to beat every seed of plain; with two
seeds of 7 tasks a rate moves in steps of 0.14, so it can call a difference of one or two tasks a win.
This pools each side's successes over the seeds both hold (a rate times its count) and gives Fisher's
exact two-sided p-value of the 2x2 table (successes and failures, mode and plain). It is a reading aid:
seeds are not independent samples of one rate (each has its own model), and the verdicts stay the
spread rule's.
"""

from __future__ import annotations

from collections.abc import Mapping

TOLERANCE = 1e-6  # how far a rate times its count may sit from a whole number of successes


def successes(rate: float, count: int) -> int | None:
    """The whole number of successes `rate` of `count` stands for, None when it stands for none."""
    k = rate * count
    return round(k) if 0 <= rate <= 1 and abs(k - round(k)) < TOLERANCE else None


def pooled_fisher_p(rates: Mapping[int, float], counts: Mapping[int, int], base_rates: Mapping[int, float],
                    base_counts: Mapping[int, int]) -> float | None:
    """Fisher's exact two-sided p of (mode, plain) x (success, failure) pooled over the seeds both sides
    hold with counts; None without such a seed or where a value is not a rate of its count."""
    from scipy.stats import fisher_exact

    seeds = sorted(rates.keys() & base_rates.keys() & counts.keys() & base_counts.keys())
    if not seeds:
        return None
    table = [[0, 0], [0, 0]]
    for row, (r, c) in enumerate(((rates, counts), (base_rates, base_counts))):
        for s in seeds:
            k = successes(r[s], c[s])
            if k is None or c[s] <= 0:
                return None
            table[row][0] += k
            table[row][1] += c[s] - k
    return float(fisher_exact(table, alternative="two-sided").pvalue)
