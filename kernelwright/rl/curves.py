"""An RL run's curves, read back from its MLflow metrics: a figure (`rl_curves.png`) and a summary.

    python bench/rl_report.py --tracking-uri sqlite:///W/mlflow.db --json rl_report.json --png rl_curves.png

`run_rl` logs both to its run when it ends. The figure has three panels over the optimizer steps: the
mean reward and its parts, the shares of completions that compiled, were correct or were a cheat, and
the KL to the starting policy beside the reward's share of the step's wall time; the step where the
curriculum turns from infill tasks to whole problems is marked. The summary gives the first and last
steps' figures (and, with `--eval-items`, the set-aside items' first and last evaluations, dashed in the
figure), completions an hour (completions a step, counted from the verdict reasons, over the
median seconds between consecutive steps' logs, so a resumed run's gap is left out) and the judge's
mean share of a step (the reward's seconds over TRL's `step_time`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from kernelwright.atomic import atomic_path  # noqa: E402
from kernelwright.rl.judge_reward import PARTS as REWARD_PARTS  # noqa: E402

PARTS = tuple(f"reward/{name}" for name in REWARD_PARTS)  # the metrics judge_reward logs per step
RATES = ("rl/compile_rate", "rl/correct_rate", "rl/cheat_rate")
OTHERS = ("reward/total", "kl", "rl/reward_share", "rl/phase", "completions/mean_length", "rl/judged_early")
TIMES = ("rl/reward_s", "step_time")  # the reward's seconds (judge_reward) and the step's (TRL), per step
# the set-aside items' figures (--eval-items), logged by TRL at the step each evaluation followed (0: the start)
EVAL = ("eval_reward/total", "eval_rl/compile_rate", "eval_rl/correct_rate")


@dataclass
class RLCurves:
    """Per-step series (step -> value) of the metrics an RL run logs, and its summary figures."""

    run_id: str
    series: dict[str, dict[int, float]] = field(default_factory=dict)
    completions: dict[int, int] = field(default_factory=dict)  # step -> completions judged (its reason counts)
    step_s: float | None = None  # median seconds between consecutive steps' logs (a resume's gap left out)

    def values(self, key: str) -> list[float]:
        return [v for _, v in sorted(self.series.get(key, {}).items())]

    def steps(self, key: str) -> list[int]:
        return sorted(self.series.get(key, {}))

    def judge_share(self) -> dict[int, float]:
        """The reward's share of each step: its seconds over TRL's `step_time` where both were logged, else
        the logged `rl/reward_share` (runs before `step_time` was read)."""
        reward_s, step_s = self.series.get("rl/reward_s", {}), self.series.get("step_time", {})
        shares = {s: min(reward_s[s] / t, 1.0) for s, t in step_s.items() if s in reward_s and t > 0}
        return shares or dict(self.series.get("rl/reward_share", {}))

    def phase_turn(self) -> int | None:
        """The first step of whole problems, when the run had both phases."""
        phase = self.series.get("rl/phase", {})
        infill = [s for s, v in phase.items() if v > 0.5]
        whole = [s for s, v in phase.items() if v <= 0.5]
        return min(whole) if infill and whole else None

    def summary(self) -> dict[str, Any]:
        steps = self.steps("reward/total")
        total = sum(self.completions.values())
        first_last = {k: {"first": self.values(k)[0], "last": self.values(k)[-1]}
                      for k in (*OTHERS[:2], *RATES, *EVAL) if self.values(k)}
        shares = list(self.judge_share().values())
        per_step = total / len(self.completions) if self.completions else None
        return {
            "run_id": self.run_id, "steps": len(steps), "completions": total,
            "first_last": first_last,
            "seconds_per_step": self.step_s,
            "completions_per_hour": 3600 * per_step / self.step_s if per_step and self.step_s else None,
            "judge_share_of_step_mean": statistics.fmean(shares) if shares else None,
            # of the distinct candidates, the share judged while their step still generated (early_judge.py)
            "judged_early_mean": statistics.fmean(early) if (early := self.values("rl/judged_early")) else None,
            "phase_turn_step": self.phase_turn(),
            "eval_at_steps": self.steps(EVAL[0]),
        }


def read_curves(client: MlflowClient, run_id: str) -> RLCurves:
    """The run's series of every key the figure and the summary use."""
    curves = RLCurves(run_id=run_id)
    for key in (*PARTS, *RATES, *OTHERS, *TIMES, *EVAL):
        history = client.get_metric_history(run_id, key)
        if history:
            curves.series[key] = {m.step: m.value for m in history}
    for key in (k for k in client.get_run(run_id).data.metrics if k.startswith("reason/")):
        for m in client.get_metric_history(run_id, key):
            curves.completions[m.step] = curves.completions.get(m.step, 0) + round(m.value)
    stamps = sorted({m.step: m.timestamp for m in client.get_metric_history(run_id, "reward/total")}.items())
    gaps = [(b[1] - a[1]) / 1000 for a, b in zip(stamps, stamps[1:], strict=False) if b[0] == a[0] + 1]
    curves.step_s = statistics.median(gaps) if gaps else None
    return curves


def curves_figure(curves: RLCurves, dest: Path) -> Path:
    """The three panels (module docstring) as a PNG at `dest`."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    reward_ax, rate_ax, kl_ax = axes
    for key in ("reward/total", *PARTS):
        if curves.values(key):
            style = {"linewidth": 2.2, "color": "black"} if key == "reward/total" else {"linewidth": 1.2}
            reward_ax.plot(curves.steps(key), curves.values(key), marker="o", markersize=3,
                           label=key.removeprefix("reward/"), **style)
    if curves.values(EVAL[0]):
        reward_ax.plot(curves.steps(EVAL[0]), curves.values(EVAL[0]), marker="s", markersize=4, linestyle="--",
                       color="black", label="total, set-aside items")
    reward_ax.set_title("mean reward per completion")
    for key in RATES:
        if curves.values(key):
            rate_ax.plot(curves.steps(key), curves.values(key), marker="o", markersize=3,
                         label=key.removeprefix("rl/").removesuffix("_rate"))
    for key, color in zip(EVAL[1:], ("tab:blue", "tab:orange"), strict=True):  # the colours of compile, correct
        if curves.values(key):
            rate_ax.plot(curves.steps(key), curves.values(key), marker="s", markersize=4, linestyle="--", color=color,
                         label=key.removeprefix("eval_rl/").removesuffix("_rate") + ", set-aside items")
    rate_ax.set_ylim(-0.03, 1.03)
    rate_ax.set_title("share of the step's completions")
    if curves.values("kl"):
        kl_ax.plot(curves.steps("kl"), curves.values("kl"), marker="o", markersize=3, color="tab:purple", label="KL")
    kl_ax.set_title("KL to the starting policy; judge's share of a step")
    share_ax = kl_ax.twinx()
    if shares := sorted(curves.judge_share().items()):
        share_ax.plot([s for s, _ in shares], [v for _, v in shares], linestyle="--", color="tab:green",
                      label="judge share")
    share_ax.set_ylim(0, 1.05)
    turn = curves.phase_turn()
    for ax in axes:
        ax.set_xlabel("optimizer step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if turn is not None:
            ax.axvline(turn - 0.5, color="grey", linestyle=":", linewidth=1)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    if share_ax.get_legend_handles_labels()[0]:
        share_ax.legend(fontsize=8, loc="lower right")
    summary = curves.summary()
    fig.suptitle(f"RL run {curves.run_id[:8]}: {summary['steps']} steps, {summary['completions']} completions"
                 + (", infill tasks then whole problems (dotted line)" if turn is not None else ""))
    fig.tight_layout()
    with atomic_path(dest) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return dest


def report(client: MlflowClient, run_id: str, png: Path) -> dict[str, Any]:
    """The figure written to `png`; the summary with the series, for JSON."""
    curves = read_curves(client, run_id)
    curves_figure(curves, png)
    return {**curves.summary(), "series": {k: {str(s): v for s, v in sorted(d.items())}
                                           for k, d in curves.series.items()}}
