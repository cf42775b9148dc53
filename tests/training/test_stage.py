"""`kernelwright train` on the CPU: MLflow run, registry version and alias, ablation, --lora/--full, configs."""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from pathlib import Path

import polars as pl
import pytest
import torch
from mlflow.tracking import MlflowClient

from kernelwright.checkpoints import RUN_ID_FILE
from kernelwright.cli import main
from kernelwright.config import parse_config
from kernelwright.errors import UsageError
from kernelwright.tracking import EXPERIMENT, REGISTERED_MODEL
from kernelwright.training.config import TrainConfig
from kernelwright.training.sft import _peft_config, _sft_args
from kernelwright.training.stage import run_train, train_command

CONFIGS = Path(__file__).resolve().parents[2] / "kernelwright" / "configs"
CUSET = {"tau_high": 0.9, "tau_low": 0.5, "region_gap": 2, "rho_max": 0.5, "alpha": 1.0, "lambda": 1.0}
STEP_METRICS = {"loss", "nll", "masked_share", "mean_sample_weight", "entropy", "mean_token_accuracy", "grad_norm",
                "learning_rate"}


@pytest.fixture()
def curated(tmp_path: Path) -> Path:
    """A small curated folder in the format `kernelwright curate` writes (token ids < the tiny vocab)."""
    g = torch.Generator().manual_seed(1)
    rows = []
    for i in range(6):
        n, prompt = 20 + 3 * i, 6
        ids = torch.randint(10, 900, (n,), generator=g).tolist()
        mask = [0] * prompt + [int(j % 4 != 0) for j in range(n - prompt)]
        rows.append({"id": f"s{i}", "task_id": f"t{i}", "category": "elementwise", "input_ids": ids,
                     "labels": [-100] * prompt + ids[prompt:], "loss_mask": mask,
                     "token_weights": [float(m) * (1.5 if j % 5 == 0 else 1.0) for j, m in enumerate(mask)],
                     "sample_weight": 0.5 + 0.2 * i})
    out = tmp_path / "curated"
    out.mkdir()
    pl.DataFrame(rows).write_parquet(out / "data.parquet")
    (out / "cuset.json").write_text(json.dumps(CUSET))
    return out


@pytest.fixture()
def store(tmp_path: Path, monkeypatch) -> str:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "1")
    return uri


def _train_args(curated: Path, model: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["train", "--data", str(curated), "--base-model", str(model), "--workdir", str(tmp_path),
            "--max-steps", "3", "--save-steps", "2", "--logging-steps", "1", "--per-device-train-batch-size", "2",
            "--max-length", "64", *extra]


def test_tiny_run_registers_candidate_with_all_params_and_metrics(curated: Path, tiny_model_dir: Path,
                                                                   tmp_path: Path, store: str) -> None:
    assert main(_train_args(curated, tiny_model_dir, tmp_path, "--weighting", "cuset")) == 0
    client = MlflowClient(store)
    version = client.get_model_version_by_alias(REGISTERED_MODEL, "candidate")
    assert version.tags["weighting"] == "cuset"
    run = client.get_run(version.run_id)
    params = run.data.params
    assert {f"kw.{f.name}" for f in fields(TrainConfig)} <= params.keys()
    assert {f"cuset.{k}": str(v) for k, v in CUSET.items()}.items() <= params.items()
    assert params["kw.weighting"] == "cuset" and run.data.tags["kw.weighting"] == "cuset"
    assert STEP_METRICS | {"train_loss"} <= run.data.metrics.keys()
    assert [m.step for m in client.get_metric_history(run.info.run_id, "nll")] == [1, 2, 3]
    assert any(k.startswith("system/") for k in run.data.metrics), "system metrics were not logged"
    assert [d.dataset.name for d in run.inputs.dataset_inputs] == ["curated"]
    assert run.data.tags["kw.registered_version"] == str(version.version)
    out = tmp_path / "train"
    assert (out / RUN_ID_FILE).read_text() == run.info.run_id
    assert (out / "checkpoint-2" / RUN_ID_FILE).read_text() == run.info.run_id


def test_ablation_trains_each_weighting_under_one_parent(curated: Path, tiny_model_dir: Path, tmp_path: Path,
                                                         store: str) -> None:
    assert main(_train_args(curated, tiny_model_dir, tmp_path, "--ablation", "plain,cuset")) == 0
    client = MlflowClient(store)
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    [parent] = client.search_runs([exp.experiment_id], "tags.`kernelwright.stage` = 'train-ablation'")
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    by_name = {r.info.run_name: r for r in children}
    assert sorted(by_name) == ["train[cuset]", "train[plain]"]
    for mode, child in ((m, by_name[f"train[{m}]"]) for m in ("plain", "cuset")):
        assert child.data.params["kw.weighting"] == mode and child.data.tags["kw.weighting"] == mode
        assert child.data.params["kw.seed"] == "0" and child.data.params["kw.data"] == str(curated)
        version = parent.data.tags[f"kw.ablation.{mode}.version"]
        mv = client.get_model_version(REGISTERED_MODEL, version)
        assert mv.run_id == child.info.run_id and mv.tags["weighting"] == mode
    plain, cuset = by_name["train[plain]"].data.metrics, by_name["train[cuset]"].data.metrics
    assert plain["masked_share"] == 0 and cuset["masked_share"] > 0
    candidate = client.get_model_version_by_alias(REGISTERED_MODEL, "candidate")
    assert candidate.tags["weighting"] == "plain"  # --weighting's default
    assert (tmp_path / "train" / "plain" / "final" / "config.json").is_file()
    # the same command again: the same parent run, the registered weightings are kept, not retrained
    assert main(_train_args(curated, tiny_model_dir, tmp_path, "--ablation", "plain,cuset")) == 0
    assert [r.info.run_id for r in client.search_runs([exp.experiment_id], "tags.`kernelwright.stage` = "
                                                      "'train-ablation'")] == [parent.info.run_id]
    assert len(client.search_model_versions(f"name = '{REGISTERED_MODEL}'")) == 2


def test_lora_and_full_flags(curated: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    def cfg(*argv: str) -> TrainConfig:
        return parse_config(TrainConfig, list(argv), "kernelwright train")

    assert not cfg().lora and not cfg("--full").lora
    with pytest.raises(UsageError, match="exclude each other"):
        cfg("--lora", "--full")
    with pytest.raises(UsageError, match="needs --lora"):
        cfg("--merge-lora")
    lora = cfg("--lora", "--lora-target-modules", "q_proj, v_proj", "--lora-r", "4")
    peft = _peft_config(lora)
    assert peft is not None and set(peft.target_modules) == {"q_proj", "v_proj"} and peft.r == 4
    assert _peft_config(cfg("--lora")).target_modules == "all-linear"  # type: ignore[union-attr]
    common = dict(data=str(curated), base_model=str(tiny_model_dir), workdir=str(tmp_path), max_steps=1,
                  max_length=64, save_steps=10)
    adapter = run_train(TrainConfig(**common, lora=True, lora_r=4, output_dir=str(tmp_path / "a")))  # type: ignore[arg-type]
    assert (adapter.model_dir / "adapter_config.json").is_file()
    merged = run_train(TrainConfig(**common, lora=True, merge_lora=True, output_dir=str(tmp_path / "m")))  # type: ignore[arg-type]
    assert (merged.model_dir / "config.json").is_file() and not (merged.model_dir / "adapter_config.json").exists()


@pytest.mark.parametrize("data", ["empty", "missing"])
def test_data_without_curated_data_stops_before_any_mlflow_store(tmp_path: Path, data: str, monkeypatch) -> None:
    folder, workdir, elsewhere = tmp_path / data, tmp_path / "wd", tmp_path / "elsewhere.db"
    if data == "empty":
        folder.mkdir()
    for uri in (None, f"sqlite:///{elsewhere}"):  # the work folder's store, then MLFLOW_TRACKING_URI's
        if uri is None:
            monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        else:
            monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        with pytest.raises(UsageError) as err:
            train_command(TrainConfig(data=str(folder), workdir=str(workdir), max_steps=1))
        assert not (workdir / "mlflow.db").exists() and not elsewhere.exists() and not (workdir / "train").exists()
        assert f"{folder} holds no curated data" in str(err.value)
        assert f"`kernelwright curate --out {folder}`" in str(err.value)


def _runs(uri: str) -> list:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    return client.search_runs([exp.experiment_id]) if exp is not None else []


def test_checkpoint_of_a_run_in_another_store_resumes_into_a_new_run(curated: Path, tiny_model_dir: Path,
                                                                       tmp_path: Path, monkeypatch,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    first, second = f"sqlite:///{tmp_path / 'first.db'}", f"sqlite:///{tmp_path / 'second.db'}"

    def train(steps: int) -> int:
        return main(["train", "--data", str(curated), "--base-model", str(tiny_model_dir), "--workdir", str(tmp_path),
                     "--max-steps", str(steps), "--save-steps", "2", "--logging-steps", "1", "--max-length", "64",
                     "--per-device-train-batch-size", "2", "--register", "false", "--system-metrics", "false"])

    monkeypatch.setenv("MLFLOW_TRACKING_URI", first)
    assert train(2) == 0
    out = tmp_path / "train"
    old_id = (out / "checkpoint-2" / RUN_ID_FILE).read_text()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", second)  # the checkpoint's run is in `first` only
    with caplog.at_level(logging.WARNING, logger="kernelwright.training.resume"):
        assert train(4) == 0
    assert f"{out} holds checkpoints of MLflow run {old_id}" in caplog.text
    [run] = _runs(second)
    assert run.info.run_id != old_id and run.data.tags["kw.resumed_from"] == str(out / "checkpoint-2")
    steps = [m.step for m in MlflowClient(second).get_metric_history(run.info.run_id, "loss")]
    assert steps == [3, 4]  # weights, optimizer and step came from checkpoint-2
    assert (out / RUN_ID_FILE).read_text() == (out / "checkpoint-4" / RUN_ID_FILE).read_text() == run.info.run_id
    assert [r.info.run_id for r in _runs(first)] == [old_id]
    assert (out / "final" / "config.json").is_file()


def test_resuming_with_other_settings_is_refused_naming_them(curated: Path, tiny_model_dir: Path, tmp_path: Path,
                                                              store: str, capsys) -> None:
    """A run's params are fixed once logged: a rerun into the same output folder (and store) with other settings
    would resume that run under settings it was not begun with; it is refused before any model loads."""
    assert main(_train_args(curated, tiny_model_dir, tmp_path, "--register", "false")) == 0
    capsys.readouterr()
    args = _train_args(curated, tiny_model_dir, tmp_path, "--register", "false")
    args[args.index("--max-steps") + 1] = "5"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'train'} holds a run begun with other settings (kw.max_steps: 3 -> 5)" in err
    assert "--output-dir" in err and "Traceback" not in err


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("train-*.yaml")), ids=lambda p: p.name)
def test_shipped_train_configs_parse(path: Path) -> None:
    assert path.read_text().startswith("# kernelwright train --config") or "accelerate launch" in path.read_text()
    cfg = parse_config(TrainConfig, ["--config", str(path)], "kernelwright train")
    assert cfg.max_steps > 0


def test_shipped_accelerate_config_parses() -> None:
    from accelerate.commands.config.config_args import ClusterConfig

    cluster = ClusterConfig.from_yaml_file(str(CONFIGS / "accelerate-fsdp.yaml"))  # rejects unknown keys
    assert str(cluster.distributed_type) == "DistributedType.FSDP" and cluster.fsdp_config["fsdp_version"] == 2


def test_sampling_reaches_the_trainer_and_groups_lengths() -> None:
    """--sampling group_by_length is transformers' LengthGroupedSampler (less padding per batch); a
    name it does not know is refused before anything loads."""
    assert _sft_args(TrainConfig(max_steps=1), Path("/tmp/unused")).train_sampling_strategy == "random"
    grouped = parse_config(TrainConfig, ["--sampling", "group_by_length", "--max-steps", "1"], "kernelwright train")
    assert _sft_args(grouped, Path("/tmp/unused")).train_sampling_strategy == "group_by_length"
    with pytest.raises(UsageError, match="sampling must be one of random, group_by_length"):
        parse_config(TrainConfig, ["--sampling", "sorted"], "kernelwright train")



@pytest.mark.parametrize("text", ["{not json", "[" * 100_000, "[1, 2]"])
def test_a_broken_cuset_json_beside_the_curated_data_is_a_usage_error(tmp_path, text) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kernelwright.errors import UsageError
    from kernelwright.training.data import load_curated

    cols = {"input_ids": [[1, 2]], "labels": [[-100, 2]], "token_weights": [[0.0, 1.0]],
            "loss_mask": [[0.0, 1.0]], "sample_weight": [1.0]}
    pq.write_table(pa.table(cols), tmp_path / "data.parquet")
    (tmp_path / "cuset.json").write_text(text)
    with pytest.raises(UsageError, match="cuset.json"):
        load_curated(tmp_path)
