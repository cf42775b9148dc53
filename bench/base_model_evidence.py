"""Does CuSeT act? The seed corpus curated with a random base and with the pretrained base, side by side.

    PYTHONPATH=. .venv/bin/python bench/base_model_evidence.py --workdir /tmp/kw-evidence [--json out.json]
    PYTHONPATH=. .venv/bin/python bench/base_model_evidence.py --pretrained .kernelwright/base-model

For each base (the random-weight tiny model with a tokenizer trained on the seed corpus, as the
embedded default was before the pretrained base; and the pretrained tiny base, built or reused
in `<workdir>/base-model` unless `--pretrained` names one): `kernelwright curate` of the seed
train split with the default CuSeT constants, each as its own MLflow run `curate` (figures as
params `curate.figure.*`), and the held-out perplexity / bits per character on the seed test
split. Prints one table; `--json` writes the figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mlflow
import torch

from kernelwright.base_model.perplexity import heldout_perplexity
from kernelwright.base_model.pretrain import ensure_default_base
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.outputs import HEADLINE
from kernelwright.curation.stage import run_curate
from kernelwright.models import TinyModelSpec, build_tiny_model, load_base_model, load_tokenizer
from kernelwright.seed import load_seed_tasks
from kernelwright.tracking import setup_tracking, stage_run
from kernelwright.workdir import resolve_workdir


def random_base(workdir: Path) -> Path:
    path = workdir / "random-base"
    if not (path / "config.json").is_file():
        texts = [t.reference + "\n" + t.solution for t in load_seed_tasks()]
        build_tiny_model(path, texts, TinyModelSpec())
    return path


def figures(name: str, base: Path, workdir: Path) -> dict[str, float | str]:
    with stage_run("curate", tags={"kw.evidence": name}):
        out = run_curate(CurateConfig(split="train", base_model=str(base), out=str(workdir / f"curated-{name}"),
                                      workdir=str(workdir)))
    stats = json.loads((out / "report.json").read_text())["stats"]
    ppl = heldout_perplexity(load_base_model(base, dtype=torch.float32, device="cpu"), load_tokenizer(base))
    return {"base": str(base), **{k: stats[k] for k in HEADLINE if k in stats},
            "heldout_perplexity": ppl.perplexity, "heldout_bits_per_char": ppl.bits_per_char,
            "heatmap": str(out / "weights.png")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--pretrained", default=None, help="a pretrained base folder (default: build or reuse)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    workdir = resolve_workdir(args.workdir)
    setup_tracking(workdir)
    pretrained = Path(args.pretrained) if args.pretrained else None
    if pretrained is None:
        with stage_run("evidence"):
            pretrained = ensure_default_base(workdir)
    rows = {"random": figures("random", random_base(workdir), workdir),
            "pretrained": figures("pretrained", pretrained, workdir)}
    keys = [k for k in rows["random"] if k not in ("base", "heatmap")]
    print(f"{'figure':<28}{'random base':>14}{'pretrained':>14}")
    for k in keys:
        print(f"{k:<28}{float(rows['random'][k]):>14.4g}{float(rows['pretrained'][k]):>14.4g}")
    print(f"heat maps: {rows['random']['heatmap']}  {rows['pretrained']['heatmap']}")
    print(f"MLflow store: {mlflow.get_tracking_uri()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
