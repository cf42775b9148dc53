"""An RL run's curves and summary from an MLflow store: reward and its parts, compile/correct/cheat shares,
KL, the judge's share of a step, completions an hour (kernelwright/rl/curves.py).

    PYTHONPATH=. python bench/rl_report.py --tracking-uri sqlite:///W/mlflow.db --json rl_report.json \\
        --png rl_curves.png                       # the store's latest `rl` run; --run-id picks another

Prints the summary; writes the figure and the JSON (summary and every series).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from kernelwright.rl.curves import report
from kernelwright.tracking import EXPERIMENT


def latest_rl_run(client: MlflowClient) -> str:
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`kernelwright.stage` = 'rl'",
                              order_by=["attributes.start_time DESC"], max_results=1) if exp else []
    if not runs:
        sys.exit(f"no rl run in the store's {EXPERIMENT!r} experiment")
    return str(runs[0].info.run_id)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tracking-uri", required=True, help="the MLflow store, e.g. sqlite:///W/mlflow.db")
    p.add_argument("--run-id", default=None, help="the rl run (default: the latest)")
    p.add_argument("--json", type=Path, default=Path("rl_report.json"), help="where to write the summary and series")
    p.add_argument("--png", type=Path, default=Path("rl_curves.png"), help="where to write the figure")
    a = p.parse_args(argv)
    client = MlflowClient(a.tracking_uri)
    result = report(client, a.run_id or latest_rl_run(client), a.png)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "series"}, indent=1))
    print(f"wrote {a.json} and {a.png}")


if __name__ == "__main__":
    main()
