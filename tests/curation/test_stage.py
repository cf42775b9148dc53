"""`kernelwright curate` end to end on an input corpus: the outputs, the MLflow run, the error when nothing is left."""

from __future__ import annotations

from pathlib import Path

import pytest


def _corpus(path: Path) -> Path:
    import json

    from kernelwright.seed import load_seed_tasks

    recs = [{"level_id": 1, "task_id": i + 1, "ref_code": t.reference, "custom_code": t.solution}
            for i, t in enumerate(load_seed_tasks()[::24][:3])]
    recs.append({"level_id": 1, "task_id": 9, "ref_code": recs[0]["ref_code"], "custom_code": None})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + "{broken\n")
    return path


def test_curate_cli_on_an_input_corpus(tmp_path: Path, tiny_model_dir: Path) -> None:
    import json

    import polars as pl
    from mlflow.tracking import MlflowClient

    from kernelwright.cli import main
    from kernelwright.workdir import tracking_uri

    corpus, out, wd = _corpus(tmp_path / "c.jsonl"), tmp_path / "out", tmp_path / "wd"
    args = ["curate", "--input", str(corpus), "--map", "prompt=ref_code,completion=custom_code",
            "--base-model", str(tiny_model_dir), "--out", str(out), "--workdir", str(wd)]
    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())["filters"]
    assert (report["input_rows"], report["kept"], report["parse_errors"]["count"]) == (5, 3, 2)
    assert pl.read_parquet(out / "data.parquet").height == 3
    assert pl.read_parquet(out / "ingested.parquet").height == 5
    client = MlflowClient(tracking_uri(wd))
    run = client.search_runs([client.get_experiment_by_name("kernelwright").experiment_id])[0]
    assert run.data.params["curate.near_dup_threshold"] == "0.85"
    assert {i.dataset.name for i in run.inputs.dataset_inputs} >= {"c.jsonl", "curated"}
    assert main([*args[:4], "prompt=ref_code,completion=kernel", *args[5:]]) == 2  # missing column: exit 2


def test_curate_takes_the_seed_training_split_beside_its_inputs_when_asked(tmp_path: Path,
                                                                           tiny_model_dir: Path) -> None:
    import polars as pl

    from kernelwright.cli import main
    from kernelwright.seed import load_seed_tasks, split_tasks

    corpus, out = _corpus(tmp_path / "c.jsonl"), tmp_path / "out"
    args = ["curate", "--input", str(corpus), "--map", "prompt=ref_code,completion=custom_code",
            "--base-model", str(tiny_model_dir), "--out", str(out), "--workdir", str(tmp_path / "wd"),
            "--no-nvrtc", "--with-seed-split"]
    assert main(args) == 0
    ingested = pl.read_parquet(out / "ingested.parquet")
    train, test = split_tasks(load_seed_tasks())
    assert ingested.height == 5 + len(train) and ingested["id"].n_unique() == ingested.height
    task_ids = set(ingested["task_id"].drop_nulls())
    assert {t.id for t in train} <= task_ids and not {t.id for t in test} & task_ids  # held-out stays out


CL1_LIKE = Path(__file__).resolve().parents[1] / "fixtures" / "curation" / "cl1_like.jsonl"


def test_curate_cli_says_which_filters_emptied_the_corpus(tmp_path: Path, tiny_model_dir: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Every row of the fixture is removed, only one of them by the length limit: the error counts
    each filter's removals and points at report.json, written before it."""
    import json

    from kernelwright.cli import main

    out = tmp_path / "out"
    args = ["curate", "--input", str(CL1_LIKE), "--map", "prompt=ref_code,completion=custom_code",
            "--base-model", str(tiny_model_dir), "--out", str(out), "--workdir", str(tmp_path / "wd"),
            "--nvrtc", "false", "--max-length", "64"]
    assert main(args) == 2
    message = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    expected = ("nothing left to write: 3 did not parse, 1 harness_tampering, 2 fallback_try_except, "
                "2 fallback_torch_op, 1 no_kernel, 1 longer than max_length=64; "
                f"see {out / 'report.json'}")
    assert expected in message and "Traceback" not in message
    report = json.loads((out / "report.json").read_text())["filters"]
    assert (report["input_rows"], report["kept"], report["parse_errors"]["count"]) == (10, 0, 3)
    counts = {k: v["count"] for k, v in report["removed"].items() if v["count"]}
    assert counts == {"harness_tampering": 1, "fallback_try_except": 2, "fallback_torch_op": 2, "no_kernel": 1,
                      "too_long": 1}
    assert not list(out.glob(".*.tmp")) and not (out / "data.parquet").exists()


def test_curate_without_nvrtc_says_so_in_one_line(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """On a machine where NVRTC does not load, the NVRTC filter is a usage error naming the way out, not a
    traceback."""
    from kernelwright.cli import main
    from kernelwright.cuda.nvrtc import program

    def no_nvrtc() -> None:
        raise ImportError("no NVRTC wheel for this platform")

    monkeypatch.setattr(program, "load_nvrtc", no_nvrtc)
    args = ["curate", "--input", str(_corpus(tmp_path / "c.jsonl")), "--map", "prompt=ref_code,completion=custom_code",
            "--base-model", str(tiny_model_dir), "--out", str(tmp_path / "out"), "--workdir", str(tmp_path / "wd")]
    assert main(args) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "NVRTC could not be loaded" in message and "--nvrtc false" in message and "Traceback" not in message
