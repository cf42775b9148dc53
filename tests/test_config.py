from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.config import parse_config
from kernelwright.errors import UsageError
from kernelwright.training.config import TrainConfig


def test_yaml_then_flags_override(tmp_path: Path) -> None:
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("max_steps: 7\nlearning_rate: 0.5\nweighting: token\n")
    cfg = parse_config(TrainConfig, ["--config", str(cfg_file), "--max-steps", "9"], "t")
    assert (cfg.max_steps, cfg.learning_rate, cfg.weighting) == (9, 0.5, "token")


def test_unknown_yaml_key_names_it(tmp_path: Path) -> None:
    cfg_file = tmp_path / "bad.yaml"
    cfg_file.write_text("max_steps: 3\nlearning_rat: 0.1\n")
    with pytest.raises(UsageError, match="'learning_rat'"):
        parse_config(TrainConfig, ["--config", str(cfg_file)], "t")


def test_cli_unknown_yaml_key_exits_2(tmp_path: Path, capsys) -> None:
    cfg_file = tmp_path / "bad.yaml"
    cfg_file.write_text("bogus_key: 1\n")
    assert main(["train", "--config", str(cfg_file)]) == 2
    assert "bogus_key" in capsys.readouterr().err


def test_cli_unknown_flag_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["train", "--no-such-flag"])
    assert exc.value.code == 2
    assert "--no-such-flag" in capsys.readouterr().err


def test_invalid_value_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="weighting"):
        parse_config(TrainConfig, ["--weighting", "heavy"], "t")


def test_missing_config_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not found"):
        parse_config(TrainConfig, ["--config", str(tmp_path / "nope.yaml")], "t")


def test_unknown_command_exits_2(capsys) -> None:
    assert main(["frobnicate"]) == 2


@pytest.mark.parametrize("argv", [
    ["curate", "--input", "{tmp}/missing.jsonl"],
    ["curate", "--decontaminate-against", "{tmp}/no-such-folder"],
    ["curate", "--base-model", "{tmp}/no-model"],
    ["pipeline", "--base-model", "{tmp}/no-model"],
])
def test_bad_paths_are_refused_before_the_store_is_created(argv: list[str], tmp_path: Path, monkeypatch,
                                                          capsys) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workdir = tmp_path / "kw"
    assert main([a.format(tmp=tmp_path) for a in argv] + ["--workdir", str(workdir)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "not found" in err or "no Hugging Face checkpoint" in err
    assert not (workdir / "mlflow.db").exists()


@pytest.mark.parametrize("text, why", [
    ("max_steps: many\n", "max_steps: invalid value 'many'"),
    ("max_steps: 2.5\n", "max_steps: invalid value 2.5"),
    ("max_steps: [1]\n", "max_steps must be one value, not list"),
    ("lora: maybe\n", "lora: invalid value 'maybe'"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nests too deeply"),
])
def test_a_yaml_value_is_converted_as_its_flag_would_be(tmp_path: Path, text: str, why: str) -> None:
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(text)
    with pytest.raises(UsageError, match=why.replace("[", r"\[")):
        parse_config(TrainConfig, ["--config", str(cfg_file)], "t")


def test_yaml_values_of_every_kind_take(tmp_path: Path) -> None:
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("max_steps: 5\nlearning_rate: 1e-3\nlora: true\nbf16: false\nsampling: group_by_length\n")
    cfg = parse_config(TrainConfig, ["--config", str(cfg_file)], "t")
    assert (cfg.max_steps, cfg.learning_rate, cfg.lora, cfg.bf16, cfg.sampling) == (5, 1e-3, True, False,
                                                                                   "group_by_length")


def test_a_config_file_that_is_not_text_is_a_usage_error(tmp_path: Path) -> None:
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match="not UTF-8 text"):
        parse_config(TrainConfig, ["--config", str(cfg_file)], "t")


@pytest.mark.parametrize("command, argv, words", [
    ("train", ["--learning-rate", "nan"], "learning_rate must be a positive number"),
    ("train", ["--per-device-train-batch-size", "0"], "per_device_train_batch_size"),
    ("train", ["--max-length", "0"], "max_length must be at least 1"),
    ("evaluate", ["--batch-size", "0"], "batch_size and max_new_tokens must be at least 1"),
    ("evaluate", ["--max-new-tokens", "0"], "batch_size and max_new_tokens must be at least 1"),
    ("evaluate", ["--temperature", "nan"], "temperature must be 0 (greedy) or more"),
    ("curate", ["--rho-max", "-1"], "must not be negative"),
    ("curate", ["--with-seed-split"], "with_seed_split needs --input"),
])
def test_settings_that_cannot_work_exit_2_before_any_work(command: str, argv: list[str], words: str, capsys,
                                                          tmp_path: Path) -> None:
    assert main([command, *argv, "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


@pytest.mark.parametrize("argv, words", [
    (["rl", "--learning-rate", "nan"], "learning_rate must be a positive number"),
    (["base-model", "pretrain", "--size", "micro", "--learning-rate", "nan"], "must be finite"),
    (["base-model", "pretrain", "--size", "micro", "--seq-len", "1"], "seq_len must be 0"),
])
def test_training_settings_that_cannot_learn_exit_2(argv: list[str], words: str, capsys, tmp_path: Path) -> None:
    assert main([*argv, "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


@pytest.mark.parametrize("argv, words", [
    (["verify", "--static", "--seeds", "0"], "seeds must be at least 1"),
    (["verify", "--static", "--timeout-s", "-5"], "timeout_s must be positive"),
    (["verify", "--static", "--memory-fraction", "0"], "memory_fraction must be in (0, 1]"),
    (["evaluate", "--verify-seeds", "0"], "verify_seeds must be at least 1"),
    (["evaluate", "--timeout-s", "nan"], "timeout_s must be positive"),
])
def test_a_judge_that_would_check_nothing_is_refused(argv: list[str], words: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_an_output_path_that_cannot_be_written_is_one_line_not_a_traceback(tmp_path: Path, capsys) -> None:
    seed = Path(__file__).parent.parent / "kernelwright" / "seed" / "tasks" / "elementwise_elu"
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    code = main(["verify", "--static", "--problem", str(seed / "reference.py"), "--candidate",
                 str(seed / "solution.py"), "--json", str(blocker / "out.json")])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot use {blocker / 'out.json'}:" in err and "Traceback" not in err
