"""Pretraining a micro base model on a small corpus: loss falls, resume continues, reuse by digest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from kernelwright.base_model import pretrain as pretrain_module
from kernelwright.base_model.config import REGISTERED_BASE, PretrainConfig
from kernelwright.base_model.loop import STATE_FILE, LoopPlan, LoopState, cosine_lr, schedule_position
from kernelwright.base_model.pretrain import (
    META_FILE,
    _new_model,
    idle_cores,
    run_pretrain,
)
from kernelwright.base_model.tokenizer import IGNORE, BlockSampler, train_code_tokenizer
from kernelwright.cli import main
from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.tracking import EXPERIMENT

STEPS = 24


def _cfg(code_dir: Path, out: Path, **kw) -> PretrainConfig:
    return PretrainConfig(size="micro", source=[str(code_dir)], out=str(out), workdir=str(out.parent / "wd"),
                          max_steps=STEPS, warmup_steps=4, register=False, **kw)


def test_loss_falls_and_the_result_is_an_hf_checkpoint(code_dir: Path, tmp_path: Path, monkeypatch) -> None:
    keep = {}
    monkeypatch.setattr(pretrain_module, "train_code_tokenizer",
                        lambda *a: keep.setdefault("t", train_code_tokenizer(*a)))
    result = run_pretrain(_cfg(code_dir, tmp_path / "base"))
    keep["t"].save_pretrained(tmp_path / "tok")
    meta = json.loads((result.path / META_FILE).read_text())
    losses = [loss for _, loss in meta["losses"]]
    assert result.steps == STEPS and not result.reused
    assert losses[-1] < losses[0] - 0.5
    assert meta["corpus"]["excluded"] == 1 and meta["corpus_digest"] == result.corpus_digest
    tokenizer = load_tokenizer(result.path)
    model = load_base_model(result.path, device="cpu")
    fresh = _new_model(_cfg(code_dir, tmp_path / "x").preset(), tokenizer, seed=0)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, fresh.state_dict()[n])]
    assert len(changed) == len(list(model.parameters()))
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.get_vocab()
    trained = load_tokenizer(tmp_path / "tok")
    text = (code_dir / "heapq.py").read_text()
    assert tokenizer(text)["input_ids"] == trained(text)["input_ids"]  # what curation sees is what was trained
    assert meta["heldout"]["samples"] > 0 and meta["heldout"]["bits_per_char"] > 0
    assert not (tmp_path / ".base.pretrain").exists()  # the checkpoint goes once the model is written


def test_reused_when_digest_and_config_match_else_built_again(code_dir: Path, tmp_path: Path) -> None:
    first = run_pretrain(_cfg(code_dir, tmp_path / "base"))
    again = run_pretrain(_cfg(code_dir, tmp_path / "base"))
    assert again.reused and again.key == first.key and again.path == first.path
    assert not run_pretrain(_cfg(code_dir, tmp_path / "base", seed=1)).reused
    (code_dir / "bisect.py").write_text("def f(x):\n    return x + 1\n" * 50)
    rebuilt = run_pretrain(_cfg(code_dir, tmp_path / "base", seed=1))
    assert not rebuilt.reused and rebuilt.corpus_digest != first.corpus_digest


def test_a_vocabulary_override_sizes_tokenizer_and_model_and_is_not_reused_for_another(
        code_dir: Path, tmp_path: Path) -> None:
    first = run_pretrain(_cfg(code_dir, tmp_path / "base"))
    wider = run_pretrain(_cfg(code_dir, tmp_path / "wider", vocab_size=640))
    assert wider.key != first.key
    assert load_base_model(wider.path, device="cpu").get_input_embeddings().num_embeddings == 640
    assert len(load_tokenizer(first.path)) <= 512 < len(load_tokenizer(wider.path)) <= 640
    text = (code_dir / "heapq.py").read_text()
    assert len(load_tokenizer(wider.path)(text)["input_ids"]) < len(load_tokenizer(first.path)(text)["input_ids"])
    assert not run_pretrain(_cfg(code_dir, tmp_path / "base", vocab_size=640)).reused  # another identity


def test_an_interrupted_run_resumes_where_it_stopped(code_dir: Path, tmp_path: Path) -> None:
    whole = run_pretrain(_cfg(code_dir, tmp_path / "whole"))

    def stop_at_10(state: LoopState) -> None:
        if state.step == 10:
            raise KeyboardInterrupt

    cfg = _cfg(code_dir, tmp_path / "split")
    with pytest.raises(KeyboardInterrupt):
        run_pretrain(cfg, on_step=stop_at_10)
    saved = torch.load(tmp_path / ".split.pretrain" / STATE_FILE, weights_only=False)
    assert saved["loop"]["step"] == 10 and saved["loop"]["blocks"] == 40
    seen: list[int] = []
    resumed = run_pretrain(cfg, on_step=lambda s: seen.append(s.step))
    assert seen[0] == 11 and resumed.steps == STEPS
    a = load_base_model(whole.path, device="cpu").state_dict()
    b = load_base_model(resumed.path, device="cpu").state_dict()
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


@pytest.mark.parametrize(("cores", "load", "threads"), [
    (2, 0.0, 2), (2, 0.9, 2), (2, 1.6, 1), (2, 3.5, 1), (16, 1.0, 16), (16, 9.0, 8), (1, 0.0, 1)])
def test_small_sizes_take_the_cores_other_work_leaves_idle(cores: int, load: float, threads: int) -> None:
    assert idle_cores(cores, load) == threads


def test_cosine_schedule_warms_up_then_decays_to_the_floor() -> None:
    lrs = [cosine_lr(s, max(s - 10, 0) / 90, 10, 1.0, 0.1) for s in range(101)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False)) and lrs[100] == pytest.approx(0.1)


def test_the_schedule_follows_steps_or_time_whichever_is_further() -> None:
    plan = LoopPlan(batch_size=1, learning_rate=1.0, warmup_steps=2, max_steps=100, budget_s=10.0)
    assert schedule_position(LoopState(step=50, spent_s=2.0, budget_s=10.0), plan) == pytest.approx(0.5)
    assert schedule_position(LoopState(step=10, spent_s=8.0, budget_s=10.0), plan) == pytest.approx(0.8)
    assert schedule_position(LoopState(step=10, spent_s=80.0, budget_s=10.0), plan) == 1.0


def test_cli_logs_the_run_and_registers_the_base(code_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    wd = tmp_path / "wd"
    args = ["base-model", "pretrain", "--size", "micro", "--source", str(code_dir), "--max-steps", "6",
            "--warmup-steps", "2", "--workdir", str(wd)]
    assert main(args) == 0
    client = MlflowClient(f"sqlite:///{wd / 'mlflow.db'}")
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    run = client.search_runs([exp.experiment_id], filter_string="tags.`kernelwright.stage` = 'base-model'")[0]
    assert len(run.data.params["base.corpus_digest"]) == 64 and run.data.params["base.size"] == "micro"
    assert run.data.params["base.corpus_excluded"] == "1"
    assert len(client.get_metric_history(run.info.run_id, "loss")) >= 2
    assert "heldout.bits_per_char" in run.data.metrics
    versions = client.search_model_versions(f"name='{REGISTERED_BASE}'")
    assert [v.run_id for v in versions] == [run.info.run_id]
    assert (wd / "base-model" / "config.json").is_file()
    assert main(args) == 0  # reused: same digest and config
    assert len(client.search_model_versions(f"name='{REGISTERED_BASE}'")) == 1


@pytest.mark.parametrize("argv", [["base-model"], ["base-model", "train"], ["base-model", "pretrain", "--size", "huge"],
                                  ["base-model", "pretrain", "--minutes", "-1"],
                                  ["base-model", "pretrain", "--vocab-size", "100"],
                                  ["base-model", "pretrain", "--source", "/no/such/folder"],
                                  ["base-model", "pretrain", "--decontaminate-against", "/no/such/folder"]])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], tmp_path: Path, capsys) -> None:
    assert main([*argv, "--workdir", str(tmp_path)] if len(argv) > 2 else argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error" in err.lower()


def test_curriculum_trains_short_sequences_first_then_joined_blocks(tmp_path: Path) -> None:
    from kernelwright.base_model.loop import make_optimizer, train_loop

    cfg = PretrainConfig(size="micro")
    model = _new_model(cfg.preset(), load_tokenizer_stub(), seed=0)
    shapes: list[tuple[int, int]] = []
    blocks = BlockSampler(torch.arange(400) % 200, block_len=4)
    plan = LoopPlan(batch_size=4, learning_rate=1e-3, warmup_steps=1, max_steps=4, budget_s=0.0,
                    units_per_sequence=2, short_share=0.5)
    original = model.forward

    def record(*args, **kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))
        return original(*args, **kwargs)

    model.forward = record  # type: ignore[method-assign]
    state = train_loop(model, make_optimizer(model, 1e-3), blocks, plan, LoopState(), tmp_path)
    assert shapes == [(4, 4), (4, 4), (2, 8), (2, 8)]  # the same tokens a step in both phases
    assert state.blocks == 16 and state.tokens == 64 and plan.units(0.49) == 1 and plan.units(0.5) == 2


def test_copy_warm_up_trains_on_exercises_first_and_consumes_no_corpus_blocks(tmp_path: Path) -> None:
    from kernelwright.base_model.loop import make_optimizer, train_loop

    model = _new_model(PretrainConfig(size="micro").preset(), load_tokenizer_stub(), seed=0)
    seen: list[torch.Tensor] = []
    original = model.forward

    def record(*args, **kwargs):
        seen.append(kwargs["input_ids"].clone())
        return original(*args, **kwargs)

    model.forward = record  # type: ignore[method-assign]
    blocks = BlockSampler(torch.arange(400) % 200, block_len=4)
    plan = LoopPlan(batch_size=4, learning_rate=1e-3, warmup_steps=1, max_steps=4, budget_s=0.0,
                    copy_steps=2, copy_batch=3, copy_width=16)
    state = train_loop(model, make_optimizer(model, 1e-3), blocks, plan, LoopState(), tmp_path)
    assert [tuple(x.shape) for x in seen] == [(3, 16), (3, 16), (4, 4), (4, 4)]
    for row in torch.cat(seen[:2]).tolist():  # a run repeated to the width
        assert any(row[k:] == row[:-k] for k in range(8, 9))
    assert torch.equal(seen[2], blocks.rows(0, 4, 1)) and state.blocks == 8  # the corpus starts after them
    assert torch.equal(blocks.copy_batch(1, 3, 16)[0], seen[1])  # drawn by step: a resume draws the same


def test_blocks_come_shuffled_each_once_an_epoch_and_again_after_a_resume() -> None:
    sampler = BlockSampler(torch.arange(80), block_len=4, seed=3)
    epoch = sampler.rows(0, 20, 1)
    assert sorted(epoch[:, 0].tolist()) == list(range(0, 80, 4)) and epoch[:, 0].tolist() != list(range(0, 80, 4))
    assert all(r.tolist() == list(range(r[0], r[0] + 4)) for r in epoch)  # a block is consecutive tokens
    assert torch.equal(sampler.rows(7, 5, 1), epoch[7:12])  # drawn by blocks consumed: a resume draws the same
    assert not torch.equal(sampler.rows(20, 20, 1), epoch)  # the next epoch, in another order
    joined = sampler.rows(0, 10, 2)
    assert joined.shape == (10, 8) and sorted(joined[:, 0].tolist()) == list(range(0, 80, 8))
    assert torch.equal(BlockSampler(torch.arange(80), block_len=4, seed=3).rows(0, 20, 1), epoch)


def test_copy_exercises_repeat_random_corpus_tokens_in_the_chosen_share_of_sequences() -> None:
    tokens = torch.arange(64_000) + 1000
    plain = BlockSampler(tokens, block_len=256, seed=1).rows(0, 200, 1)
    sampler = BlockSampler(tokens, block_len=256, seed=1, copy_share=0.25)
    rows = sampler.rows(0, 200, 1)
    changed = [i for i in range(200) if not torch.equal(rows[i], plain[i])]
    assert 30 <= len(changed) <= 70  # about a quarter, chosen by seed; the others are the plain draw
    for i in changed:
        row = rows[i].tolist()
        run = next(k for k in range(8, 129) if row[k:] == row[:-k])  # the shortest period of the row
        assert all(t >= 1000 for t in row) and len(set(row[:run])) > run // 2  # corpus tokens, not a pattern
        assert row[:run] != list(range(row[0], row[0] + run))  # drawn at random, not a block of the corpus
    assert torch.equal(sampler.rows(0, 200, 1), rows)  # the same draw again: a resume sees the same text
    ids, labels = sampler.batch(0, 200, 1)
    for i in range(200):  # the loss skips an exercise's first run (noise), and nothing else
        skipped = (labels[i] == IGNORE).nonzero().flatten().tolist()
        assert skipped == (list(range(len(skipped))) if i in changed else []) and (i not in changed or skipped)
        assert torch.equal(labels[i][len(skipped):], ids[i][len(skipped):])


def load_tokenizer_stub():
    from kernelwright.base_model.tokenizer import train_tokenizer

    return train_tokenizer(["def f(x):\n    return x\n"] * 20, 300)
