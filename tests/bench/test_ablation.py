"""The plain-vs-CuSeT ablation table (bench/cuset_ablation.py) on a work folder laid out like the
GPU script's: seeds read from the paths, unfinished evaluations left out, the spread verdicts, and
the one parent run the ablation's runs are nested under."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import mlflow
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
ablation = importlib.import_module("cuset_ablation")


def _workdir(tmp_path: Path) -> Path:
    nll = {}
    for seed, (plain, cuset) in enumerate([(0.80, 0.70), (0.82, 0.71), (0.79, 0.72)]):
        for mode, sensitive in (("plain", plain), ("cuset", cuset)):
            nll[f"/x/train-seed{seed}/{mode}/final"] = {"nll_sensitive": sensitive, "nll_other": 0.9 + seed / 100}
    (tmp_path / "heldout_nll.json").write_text(json.dumps(nll))
    for seed, mode, rate, done in [(0, "plain", 0.2, True), (1, "plain", 0.3, True), (0, "cuset", 0.1, True),
                                   (1, "cuset", 0.0, True), (2, "cuset", 0.9, False)]:
        folder = tmp_path / f"evaluate-seed{seed}-{mode}"
        folder.mkdir()
        metrics = {"compile_rate": rate, "fast_0": 0.0, "fast_1": 0.0, "own.fast_0": 0.0, "own.fast_1": 0.0}
        (folder / "results.json").write_text(json.dumps({"metrics": metrics}))
        if done:
            (folder / ".done").touch()
    return tmp_path


def test_table_reads_seeds_and_judges_the_spread(tmp_path: Path) -> None:
    rows = {r.figure: r for r in ablation.table(_workdir(tmp_path))}
    assert rows["nll_sensitive"].plain.values == {0: 0.80, 1: 0.82, 2: 0.79}
    assert rows["nll_sensitive"].verdict == "cuset wins beyond the spread"  # lower NLL on every seed
    assert rows["nll_other"].verdict == "within the spread"  # equal figures
    compile_rate = rows["compile_rate"]
    assert compile_rate.cuset.values == {0: 0.1, 1: 0.0}  # the unfinished seed 2 is left out
    assert compile_rate.verdict == "cuset loses beyond the spread"
    assert compile_rate.paired_diff == {0: -0.1, 1: -0.3}
    assert "n=2" in ablation.markdown(list(rows.values()))


def test_parent_run_nests_the_ablation_runs(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    for name in ("train-ablation", "evaluate", "base-model"):
        with mlflow.start_run(run_name=name):
            pass
    work = tmp_path / "work"
    work.mkdir()
    rows = ablation.table(_workdir(work))
    parent = ablation.log_parent(rows, uri, [])
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    nested = {r.info.run_name for r in runs if r.data.tags.get("mlflow.parentRunId") == parent}
    assert nested == {"train-ablation", "evaluate"}
    top = next(r for r in runs if r.info.run_id == parent)
    assert top.data.tags["result.compile_rate"] == "cuset loses beyond the spread"
    assert top.data.metrics["plain.nll_sensitive.mean"] == pytest.approx(0.8033, abs=1e-4)


def test_heldout_nll_splits_masked_tokens_out_of_the_others(tiny_model_dir: Path) -> None:
    import polars as pl
    import torch

    nll = importlib.import_module("heldout_token_nll")
    ids = [5, 6, 7, 8, 9, 10, 11, 12]  # prompt: the first 3; completion: 5 tokens
    data = pl.DataFrame({"input_ids": [ids], "prompt_len": [3],
                         "sensitive": [[False, False, False, True, False, False, True, False]],
                         "loss_mask": [[False, False, False, True, False, True, True, False]]})
    got = nll.token_nll(tiny_model_dir, data)
    assert (got["tokens_sensitive"], got["tokens_other"], got["tokens_masked"]) == (2.0, 3.0, 2.0)
    model = nll.load_base_model(tiny_model_dir).eval()
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, :-1].float()
    per = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="none").tolist()
    assert got["nll_masked"] == pytest.approx((per[3] + per[6]) / 2, rel=1e-5)  # tokens 4 and 7
    assert got["nll_other"] == pytest.approx((per[3] + per[4] + per[6]) / 3, rel=1e-5)
