"""The ablation table over training modes and held-out suites: means and spread across seeds, and
whether each mode beats plain beyond it (docs/training.md, "The ablation table").

    PYTHONPATH=. .venv/bin/python bench/cuset_ablation.py WORKDIR [WORKDIR ...] [--json out.json] \
        [--png out.png] [--markdown out.md] [--tracking-uri URI]
    PYTHONPATH=. .venv/bin/python bench/cuset_ablation.py seed0_table.json W1 W2 --json three_seeds.json

A WORKDIR is what `scripts/ablation_gpu.sh` or `scripts/kernel_model_gpu.sh` filled: finished
(`.done`) `evaluate-seed<S>-<mode>[-<suite>]/results.json` and `heldout_nll[_<suite>].json`. Modes
and suites come from the folder names (no suite suffix: `seed`, the held-out seed tasks). Several
WORKDIRs make one table: each a run of the recipe (its own base) with seeds of its own, so the
per-seed differences stay paired within a run; a seed two runs both hold is an error. An input may
also be a table this bench wrote (`--json`) in place of its work folders, which a GPU host does not
keep: its every seed's value and count are read back as they were.

Rows per (suite, figure): the NLL figures (`nll_other` counts the masked tokens too;
`nll_other_unmasked`, derived from the counts, leaves them out), compile_rate, fast_0, fast_1,
own.fast_0, own.fast_1 and, for infill suites, `infill.<kind>.compile_rate` and `.correct_rate`
per region kind; per mode the mean, sample sd and range over seeds and what it is over (samples
or tokens), per seed the mode minus plain. A mode wins (loses) beyond the spread when its worst
seed beats plain's best (the reverse), with two seeds a side at least. Beside it, for rates, Fisher's
exact p of the successes pooled over seeds (ablation_stats.py): a reading aid, not the verdict.

Outputs: markdown (stdout, `--markdown`), `--json` a record per row, `--png` panels per suite (NLL
on a log axis, rates from 0; ablation_plot.py), and with `--tracking-uri` one `cuset-ablation`
parent run (metrics `<mode>.<name>.mean|std|count`, tags `result.<name>` and
`result.<mode>.<name>`) with the store's ablation runs as its children.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASELINE = "plain"
MODE_ORDER = ("plain", "region", "cuset", "cusetSoft", "cusetA")
SUITE_ORDER = ("seed", "synth", "infill")
OLD_SUITE = "seed"  # the suite of folders without a suffix, and of the NLL rows
SUITE_NAMES = {"seed": "held-out seed tasks", "synth": "held-out compositions", "infill": "held-out infill tasks"}
# nll_other counts the masked tokens too; nll_other_unmasked (derived) leaves them out; both absent from older runs
NLL_FIGURES = ("nll_sensitive", "nll_other", "nll_other_unmasked", "nll_masked")
EVAL_FIGURES = ("compile_rate", "fast_0", "fast_1", "own.fast_0", "own.fast_1")
KIND_ORDER = ("index_guard", "reduction_loop", "smem_tiling", "launch_config")
INFILL_FIGURES = ("compile_rate", "correct_rate")
LOWER_IS_BETTER = set(NLL_FIGURES)
WINS, LOSES, WITHIN = "wins beyond the spread", "loses beyond the spread", "within the spread"
ONE_SEED, NOT_COMPARED = "one seed: no spread", "not compared"
SEED_MODE = re.compile(r"train-seed(\d+)/([^/]+)/final/?$")
EVAL_DIR = re.compile(r"evaluate-seed(\d+)-([^-]+)(?:-([^-]+))?")
INFILL_KEY = re.compile(r"infill\.([^.]+)\.(compile_rate|correct_rate)")


@dataclass(frozen=True)
class Cell:
    """One figure of one mode across seeds, and how many samples (or tokens) each seed's value is over."""

    values: dict[int, float]  # seed -> value
    counts: dict[int, int] = field(default_factory=dict)  # seed -> samples (tokens for NLL) the value is over

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values.values()) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values.values()) if len(self.values) > 1 else None

    @property
    def low(self) -> float | None:
        return min(self.values.values()) if self.values else None

    @property
    def high(self) -> float | None:
        return max(self.values.values()) if self.values else None

    @property
    def count(self) -> int | None:
        """Samples (tokens) over all seeds; None when a seed's count is unknown."""
        return sum(self.counts.values()) if self.values and self.counts.keys() >= self.values.keys() else None


@dataclass(frozen=True)
class Row:
    """One figure of one suite: every mode's cell, each mode minus plain per seed, and the verdicts."""

    suite: str
    figure: str
    unit: str  # what the counts count: samples or tokens
    cells: dict[str, Cell]  # mode -> cell, in mode order
    diffs: dict[str, dict[int, float]]  # mode -> seed -> mode - plain, over seeds both have (plain left out)
    verdicts: dict[str, str]  # mode -> WINS, LOSES, WITHIN, ONE_SEED or NOT_COMPARED (plain left out)
    p_values: dict[str, float | None] = field(default_factory=dict)  # mode -> pooled Fisher p (rates only)

    @property
    def name(self) -> str:
        """The figure, prefixed by its suite except in the old layout's suite: `synth/compile_rate`."""
        return self.figure if self.suite == OLD_SUITE else f"{self.suite}/{self.figure}"

    @property
    def plain(self) -> Cell:
        return self.cells.get(BASELINE, Cell({}))

    @property
    def cuset(self) -> Cell:
        return self.cells.get("cuset", Cell({}))

    @property
    def paired_diff(self) -> dict[int, float]:
        return self.diffs.get("cuset", {})

    @property
    def verdict(self) -> str:
        """CuSeT (reading B) against plain, as the two-mode table worded it."""
        v = self.verdicts.get("cuset", NOT_COMPARED)
        return f"cuset {v}" if v in (WINS, LOSES) else v


Runs = dict[tuple[str, str], dict[str, Cell]]  # (suite, figure) -> mode -> cell


def _ordered(names: set[str], order: tuple[str, ...]) -> list[str]:
    return [n for n in order if n in names] + sorted(names - set(order))


def _put(runs: Runs, suite: str, figure: str, mode: str, seed: int, value: float, count: float | None) -> None:
    cell = runs.setdefault((suite, figure), {}).setdefault(mode, Cell({}))
    cell.values[seed] = value
    if count is not None:
        cell.counts[seed] = int(count)


def _unmasked_other(figures: dict[str, float]) -> dict[str, float]:
    """The other tokens' NLL less the masked ones (which they include), where the counts allow."""
    try:
        other, masked = figures["tokens_other"], figures["tokens_masked"]
        total = figures["nll_other"] * other - figures["nll_masked"] * masked
    except KeyError:
        return {}
    rest = other - masked
    return {"nll_other_unmasked": total / rest, "tokens_other_unmasked": rest} if rest > 0 else {}


def read_runs(workdir: Path) -> Runs:
    """(suite, figure) -> mode -> cell, from heldout_nll.json and the finished evaluations."""
    runs: Runs = {}
    for nll_path in sorted(workdir.glob("heldout_nll*.json")):
        suite = nll_path.stem.removeprefix("heldout_nll").removeprefix("_") or OLD_SUITE
        for model, figures in json.loads(nll_path.read_text()).items():
            match = SEED_MODE.search(model)
            if match is None:
                continue
            figures = figures | _unmasked_other(figures)
            for f in NLL_FIGURES:
                if f in figures:
                    tokens = figures.get(f.replace("nll_", "tokens_", 1))
                    _put(runs, suite, f, match[2], int(match[1]), float(figures[f]), tokens)
    for results in sorted(workdir.glob("evaluate-seed*-*/results.json")):
        match = EVAL_DIR.fullmatch(results.parent.name)
        if not match or not (results.parent / ".done").exists():
            continue
        seed, mode, suite = int(match[1]), match[2], match[3] or OLD_SUITE
        metrics = json.loads(results.read_text())["metrics"]
        for f in EVAL_FIGURES:
            if f in metrics:
                _put(runs, suite, f, mode, seed, float(metrics[f]), metrics.get("samples"))
        for key, value in metrics.items():
            m = INFILL_KEY.fullmatch(key)
            if m:
                _put(runs, suite, key, mode, seed, float(value), metrics.get(f"infill.{m[1]}.n"))
    return runs


def read_table(path: Path) -> Runs:
    """(suite, figure) -> mode -> cell from a table this bench wrote with --json (per mode, each seed's
    value and count); a ValueError naming the file when it is not one."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
        runs: Runs = {}
        for rec in records:
            for mode, cell in rec["modes"].items():
                for seed, value in cell["values"].items():
                    _put(runs, rec["suite"], rec["figure"], mode, int(seed), float(value), cell["counts"].get(seed))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, KeyError, AttributeError, ValueError) as e:
        raise ValueError(f"{path}: not a table written by cuset_ablation.py --json ({type(e).__name__}: {e})") from None
    return runs


class SeedClash(ValueError):
    """Two work folders hold the same seed of a mode's figure."""


def read_all(workdirs: Sequence[Path]) -> Runs:
    """read_runs over several work folders (or read_table over tables written earlier), one table: each seed
    of a mode's figure from one input only."""
    runs: Runs = {}
    origin: dict[tuple[str, str, str, int], Path] = {}
    for workdir in workdirs:
        for (suite, figure), cells in (read_table(workdir) if workdir.is_file() else read_runs(workdir)).items():
            for mode, cell in cells.items():
                for seed, value in cell.values.items():
                    first = origin.setdefault((suite, figure, mode, seed), workdir)
                    if first != workdir:
                        raise SeedClash(f"seed {seed} of {mode} ({suite} {figure}) is in both {first} and {workdir}:"
                                        " give each run of the recipe seeds of its own")
                    _put(runs, suite, figure, mode, seed, value, cell.counts.get(seed))
    return runs


def _figure_order(suite_figures: set[str]) -> list[str]:
    kinds = {m[1] for f in suite_figures if (m := INFILL_KEY.fullmatch(f))}
    infill = [f"infill.{k}.{f}" for k in _ordered(kinds, KIND_ORDER) for f in INFILL_FIGURES]
    return [f for f in (*NLL_FIGURES, *EVAL_FIGURES, *infill) if f in suite_figures]


def judge(figure: str, mode: Cell, plain: Cell) -> str:
    """WINS when the mode's worst seed beats plain's best, LOSES for the reverse (two seeds a side at least)."""
    if not mode.values or not plain.values:
        return NOT_COMPARED
    if len(mode.values) < 2 or len(plain.values) < 2:
        return ONE_SEED
    sign = -1.0 if figure in LOWER_IS_BETTER else 1.0  # sign * value: higher is better
    m_scores, p_scores = [sign * v for v in mode.values.values()], [sign * v for v in plain.values.values()]
    if min(m_scores) > max(p_scores):
        return WINS
    if max(m_scores) < min(p_scores):
        return LOSES
    return WITHIN


def compare(suite: str, figure: str, cells: dict[str, Cell]) -> Row:
    """The row of one figure: modes in order, each mode minus plain per seed, each mode's verdict."""
    ordered = {m: cells[m] for m in _ordered(set(cells), MODE_ORDER)}
    plain = ordered.get(BASELINE, Cell({}))
    from ablation_stats import pooled_fisher_p

    unit = "tokens" if figure in NLL_FIGURES else "samples"  # samples: a rate, tested for chance too
    diffs, verdicts, p_values = {}, {}, {}
    for mode, cell in ordered.items():
        if mode != BASELINE:
            seeds = sorted(cell.values.keys() & plain.values.keys())
            diffs[mode] = {s: cell.values[s] - plain.values[s] for s in seeds}
            verdicts[mode] = judge(figure, cell, plain)
            p_values[mode] = (pooled_fisher_p(cell.values, cell.counts, plain.values, plain.counts)
                              if unit == "samples" else None)
    return Row(suite, figure, unit, ordered, diffs, verdicts, p_values)


def table(*workdirs: Path) -> list[Row]:
    """Every (suite, figure) row that some mode has a value of, suites then figures in order, over the
    seeds of every work folder."""
    runs = read_all(workdirs)
    rows = []
    for suite in _ordered({s for s, _ in runs}, SUITE_ORDER):
        for figure in _figure_order({f for s, f in runs if s == suite}):
            cells = {m: c for m, c in runs[(suite, figure)].items() if c.values}
            if cells:
                rows.append(compare(suite, figure, cells))
    return rows


def suites(rows: list[Row]) -> list[str]:
    return list(dict.fromkeys(r.suite for r in rows))


def modes(rows: list[Row]) -> list[str]:
    return _ordered({m for r in rows for m in r.cells}, MODE_ORDER)


def _fmt(cell: Cell) -> str:
    if cell.mean is None:
        return "-"
    spread = f" ± {cell.std:.4f}" if cell.std is not None else ""
    return f"{cell.mean:.4f}{spread} (n={len(cell.values)})"


def _range(cell: Cell) -> str:
    return "-" if cell.low is None else f"{cell.low:.4f} - {cell.high:.4f}"


def markdown(rows: list[Row]) -> str:
    """One table per suite, a line per (figure, mode): mean ± sd over seeds, range, count, - plain, verdict."""
    out = []
    for suite in suites(rows):
        out += [f"### {suite}: {SUITE_NAMES.get(suite, suite)}", "",
                "| figure | mode | mean ± sd (seeds) | range over seeds | over | mode - plain per seed | vs plain "
                "| p, pooled |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in (r for r in rows if r.suite == suite):
            for mode, cell in r.cells.items():
                over = "-" if cell.count is None else f"{cell.count} {r.unit}"
                diffs = ", ".join(f"s{s}: {d:+.4f}" for s, d in r.diffs.get(mode, {}).items()) or "-"
                verdict = "baseline" if mode == BASELINE else r.verdicts[mode]
                figure = r.figure + (" (lower better)" if r.figure in LOWER_IS_BETTER else "")
                p = r.p_values.get(mode)
                out.append(f"| {figure} | {mode} | {_fmt(cell)} | {_range(cell)} | {over} | {diffs} | {verdict} "
                           f"| {'-' if p is None else f'{p:.2g}'} |")
        out.append("")
    return "\n".join(out)


def record(r: Row) -> dict[str, Any]:
    """A row as JSON: per mode every seed's value and count, mean, sd, range and total count."""
    cells = {m: {"values": c.values, "counts": c.counts, "mean": c.mean, "std": c.std, "min": c.low, "max": c.high,
                 "count": c.count} for m, c in r.cells.items()}
    return {"suite": r.suite, "figure": r.figure, "unit": r.unit, "lower_is_better": r.figure in LOWER_IS_BETTER,
            "modes": cells, "minus_plain": r.diffs, "vs_plain": r.verdicts, "p_pooled": r.p_values}


def panels(rows: list[Row]) -> list[tuple[str, bool, list[Row]]]:
    """The figure's panels: per suite, its NLL rows (log scale: masked tokens sit 100x above the rest) and
    its rates, as (suite, is_nll, rows), those with rows."""
    out = []
    for suite in suites(rows):
        for nll in (True, False):
            part = [r for r in rows if r.suite == suite and (r.figure in LOWER_IS_BETTER) == nll]
            out += [(suite, nll, part)] if part else []
    return out


def plot(rows: list[Row], dest: Path) -> Path:
    """The figure (ablation_plot.py): a panel per suite and kind, a bar per mode at its mean, a dot per seed."""
    from ablation_plot import plot_panels

    return plot_panels(panels(rows), modes(rows), dest, SUITE_NAMES)


def summary(r: Row) -> str:
    """The modes beyond the spread against plain (`cuset loses beyond the spread; region wins ...`), else
    the verdict the modes share (WITHIN where they differ)."""
    beyond = [f"{m} {v}" for m, v in r.verdicts.items() if v in (WINS, LOSES)]
    if beyond:
        return "; ".join(beyond)
    rest = set(r.verdicts.values())
    return rest.pop() if len(rest) == 1 else WITHIN if rest else NOT_COMPARED


CHILD_RUNS = ("train-ablation", "train", "heldout-nll", "generate", "evaluate")


def log_parent(rows: list[Row], tracking_uri: str, files: list[Path]) -> str:
    """A `cuset-ablation` parent run with the summary; the store's ablation runs become its children. A store
    that has one already (an earlier table of the same recipe) gets it updated, so a rerun adds no second parent.

    Metrics `<mode>.<name>.mean|std|count`, tags `result.<name>` (summary()) and `result.<mode>.<name>`
    (the mode's verdict), where <name> is Row.name.
    """
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    client = mlflow.MlflowClient()
    metrics: dict[str, float] = {}
    tags: dict[str, str] = {}
    for r in rows:
        for mode, cell in r.cells.items():
            for stat, value in (("mean", cell.mean), ("std", cell.std), ("count", cell.count)):
                if value is not None:
                    metrics[f"{mode}.{r.name}.{stat}"] = float(value)
        tags[f"result.{r.name}"] = summary(r)
        tags |= {f"result.{mode}.{r.name}": v for mode, v in r.verdicts.items()}
    earlier = [r for exp in client.search_experiments()
               for r in client.search_runs([exp.experiment_id], "attributes.run_name = 'cuset-ablation'")]
    resumed = {"run_id": earlier[0].info.run_id} if earlier else {"run_name": "cuset-ablation"}
    with mlflow.start_run(**resumed) as parent:  # a rerun updates the one parent
        mlflow.log_metrics(metrics)
        mlflow.set_tags(tags)
        for f in files:
            mlflow.log_artifact(str(f))
        parent_id = parent.info.run_id
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id]):
            top = "mlflow.parentRunId" not in run.data.tags
            if top and run.info.run_id != parent_id and run.info.run_name in CHILD_RUNS:
                client.set_tag(run.info.run_id, "mlflow.parentRunId", parent_id)
    return parent_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdirs", type=Path, nargs="+", metavar="WORKDIR",
                    help="a work folder of the recipe, or a table this bench wrote earlier with --json")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--png", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--tracking-uri", default=None)
    args = ap.parse_args()
    try:
        rows = table(*args.workdirs)
    except ValueError as e:  # SeedClash, or a file that is no table
        raise SystemExit(str(e)) from None
    if not rows:
        folders = ", ".join(map(str, args.workdirs))
        raise SystemExit(f"{folders}: no heldout_nll.json and no finished evaluate-seed*-* folder")
    text = markdown(rows)
    print(text, end="")
    written: list[Path] = []
    if args.json:
        args.json.write_text(json.dumps([record(r) for r in rows], indent=1) + "\n")
        written.append(args.json)
    if args.markdown:
        args.markdown.write_text(text)
        written.append(args.markdown)
    if args.png:
        written.append(plot(rows, args.png))
    if args.tracking_uri:
        print(f"logged as run {log_parent(rows, args.tracking_uri, written)}")


if __name__ == "__main__":
    main()
