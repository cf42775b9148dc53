"""The plain-vs-CuSeT ablation table: means and spread across seeds, and whether CuSeT wins beyond it.

    PYTHONPATH=. .venv/bin/python bench/cuset_ablation.py WORKDIR [--json out.json] [--png out.png] \
        [--markdown out.md] [--tracking-uri URI]

WORKDIR is what `scripts/ablation_gpu.sh` filled: `heldout_nll.json` (the token-level NLL of every
trained version on the held-out seed tasks, CUDA-sensitive vs other tokens) and
`evaluate-seed<S>-<mode>/results.json` (compile rate, fast_0, fast_1 and their own-kernel views).
A version whose evaluation did not finish counts in the NLL rows and is left out of the others
(each cell says over how many seeds it is). Per figure and mode: the mean, the sample standard
deviation across seeds and the range; per seed, CuSeT minus plain. CuSeT "wins beyond the spread"
on a figure only when its worst seed beats plain's best (lower NLL, higher rates), "loses beyond the
spread" when the reverse holds, and neither otherwise.

With `--tracking-uri` (the ablation's store, e.g. sqlite:///WORKDIR/mlflow.db), one parent run
`cuset-ablation` gets the table, the figure and the summary metrics, and the ablation's
`train-ablation`, `heldout-nll`, `generate` and `evaluate` runs of that store become its children, so the
whole ablation sits under one run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

MODES = ("plain", "cuset")
NLL_FIGURES = ("nll_sensitive", "nll_other", "nll_masked")  # nll_masked: absent from older runs
EVAL_FIGURES = ("compile_rate", "fast_0", "fast_1", "own.fast_0", "own.fast_1")
LOWER_IS_BETTER = set(NLL_FIGURES)
SEED_MODE = re.compile(r"train-seed(\d+)/(plain|cuset)/final/?$")


@dataclass(frozen=True)
class Cell:
    """One figure of one mode across seeds."""

    values: dict[int, float]  # seed -> value

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values.values()) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values.values()) if len(self.values) > 1 else None


@dataclass(frozen=True)
class Row:
    figure: str
    plain: Cell
    cuset: Cell
    paired_diff: dict[int, float]  # seed -> cuset - plain, over seeds both have
    verdict: str  # cuset wins / loses beyond the spread, or within the spread


def read_runs(workdir: Path) -> dict[str, dict[str, dict[int, float]]]:
    """figure -> mode -> seed -> value, from heldout_nll.json and the finished evaluations."""
    out: dict[str, dict[str, dict[int, float]]] = {f: {m: {} for m in MODES} for f in NLL_FIGURES + EVAL_FIGURES}
    nll_path = workdir / "heldout_nll.json"
    if nll_path.is_file():
        for model, figures in json.loads(nll_path.read_text()).items():
            match = SEED_MODE.search(model)
            if match:
                for f in NLL_FIGURES:
                    if f in figures:
                        out[f][match[2]][int(match[1])] = float(figures[f])
    for results in sorted(workdir.glob("evaluate-seed*-*/results.json")):
        match = re.fullmatch(r"evaluate-seed(\d+)-(plain|cuset)", results.parent.name)
        if match and (results.parent / ".done").exists():
            metrics = json.loads(results.read_text())["metrics"]
            for f in EVAL_FIGURES:
                if f in metrics:
                    out[f][match[2]][int(match[1])] = float(metrics[f])
    return out


def compare(figure: str, plain: Cell, cuset: Cell) -> Row:
    seeds = sorted(plain.values.keys() & cuset.values.keys())
    diff = {s: cuset.values[s] - plain.values[s] for s in seeds}
    sign = -1.0 if figure in LOWER_IS_BETTER else 1.0  # sign * value: higher is better
    verdict = "within the spread"
    if plain.values and cuset.values:
        c_scores, p_scores = [sign * v for v in cuset.values.values()], [sign * v for v in plain.values.values()]
        if min(c_scores) > max(p_scores):
            verdict = "cuset wins beyond the spread"
        elif max(c_scores) < min(p_scores):
            verdict = "cuset loses beyond the spread"
    return Row(figure, plain, cuset, diff, verdict)


def table(workdir: Path) -> list[Row]:
    runs = read_runs(workdir)
    return [compare(f, Cell(runs[f]["plain"]), Cell(runs[f]["cuset"])) for f in NLL_FIGURES + EVAL_FIGURES
            if runs[f]["plain"] or runs[f]["cuset"]]


def _fmt(cell: Cell) -> str:
    if cell.mean is None:
        return "-"
    spread = f" ± {cell.std:.4f}" if cell.std is not None else ""
    return f"{cell.mean:.4f}{spread} (n={len(cell.values)})"


def markdown(rows: list[Row]) -> str:
    lines = ["| figure | plain: mean ± sd (seeds) | cuset: mean ± sd (seeds) | cuset - plain per seed | result |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        diffs = ", ".join(f"s{s}: {d:+.4f}" for s, d in r.paired_diff.items()) or "-"
        lines.append(f"| {r.figure} | {_fmt(r.plain)} | {_fmt(r.cuset)} | {diffs} | {r.verdict} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], dest: Path) -> Path:
    """One panel per figure: each seed's value per mode as a point, the mean as a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(2.2 * len(rows), 3.2), squeeze=False)
    for ax, r in zip(axes[0], rows, strict=True):
        for x, (mode, cell) in enumerate((("plain", r.plain), ("cuset", r.cuset))):
            if cell.mean is not None:
                ax.bar(x, cell.mean, color="#9bb7d4" if mode == "plain" else "#e0a36f", width=0.6)
                ax.scatter([x] * len(cell.values), list(cell.values.values()), color="black", s=12, zorder=3)
        if r.figure not in LOWER_IS_BETTER:  # rates: from 0, so that all-zero panels read as zero
            top = max([*r.plain.values.values(), *r.cuset.values.values(), 0.0])
            ax.set_ylim(0.0, max(0.1, 1.2 * top))
        ax.set_xticks([0, 1], list(MODES))
        ax.set_title(r.figure + (" (lower better)" if r.figure in LOWER_IS_BETTER else ""), fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle("plain vs CuSeT: bar = mean over seeds, dots = seeds", fontsize=9)
    fig.tight_layout()
    dest.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dest, dpi=110)
    plt.close(fig)
    return dest


def log_parent(rows: list[Row], tracking_uri: str, files: list[Path]) -> str:
    """A `cuset-ablation` parent run with the summary; the store's ablation runs become its children."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    client = mlflow.MlflowClient()
    with mlflow.start_run(run_name="cuset-ablation") as parent:
        for r in rows:
            for mode, cell in (("plain", r.plain), ("cuset", r.cuset)):
                if cell.mean is not None:
                    mlflow.log_metric(f"{mode}.{r.figure}.mean", cell.mean)
                if cell.std is not None:
                    mlflow.log_metric(f"{mode}.{r.figure}.std", cell.std)
            mlflow.set_tag(f"result.{r.figure}", r.verdict)
        for f in files:
            mlflow.log_artifact(str(f))
        parent_id = parent.info.run_id
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id]):
            top = "mlflow.parentRunId" not in run.data.tags
            if top and run.info.run_id != parent_id and run.info.run_name in ("train-ablation", "heldout-nll",
                                                                              "generate", "evaluate"):
                client.set_tag(run.info.run_id, "mlflow.parentRunId", parent_id)
    return parent_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--png", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--tracking-uri", default=None)
    args = ap.parse_args()
    rows = table(args.workdir)
    if not rows:
        raise SystemExit(f"{args.workdir}: no heldout_nll.json and no finished evaluate-seed*-* folder")
    text = markdown(rows)
    print(text, end="")
    written: list[Path] = []
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
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
