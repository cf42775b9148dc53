"""The soft token mask (curate --mask-floor) in the trainer: a masked token keeps its label and weight
m_t = mask_floor, and the loss divides by sum m_t over the accumulation window (docs/cuset.md):

    L = sum_s w_s * sum_t m_t * a_t * nll_t  /  sum_s sum_t m_t

    .venv/bin/pytest -q tests/training/test_soft_mask.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from datasets import Dataset
from trl import SFTConfig

from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.training.cuset_trainer import CusetCollator, CusetSFTTrainer
from tests.training import _one_step
from tests.training._one_step import _examples, assert_same_step, one_step

FLOOR = 0.25


def _soft_examples() -> list[dict]:
    """The shared one-step samples with their masked tokens (loss_mask 0) kept at the floor instead."""
    out = []
    for e in _examples():
        prompt = sum(label == -100 for label in e["labels"])
        mask = [0.0] * prompt + [1.0 if m else FLOOR for m in e["loss_mask"][prompt:]]
        weights = [w if m == 1.0 else FLOOR for w, m in zip(e["token_weights"], mask, strict=True)]
        out.append({**e, "loss_mask": mask, "token_weights": [0.0] * prompt + weights[prompt:]})
    return out


def _trainer(model_dir: Path, tmp_path: Path) -> CusetSFTTrainer:
    tok = load_tokenizer(model_dir)
    model = load_base_model(model_dir, dtype=torch.float32, device="cpu")
    args = SFTConfig(output_dir=str(tmp_path), bf16=False, report_to=[], use_cpu=True,
                     dataset_kwargs={"skip_prepare_dataset": True})
    return CusetSFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(_soft_examples()),
                           processing_class=tok, data_collator=CusetCollator(pad_token_id=tok.pad_token_id))


def test_collator_keeps_soft_masked_labels_and_hands_on_m() -> None:
    ex = _soft_examples()[:2]
    batch = CusetCollator(pad_token_id=0, weighting="cuset")(ex)
    for i, e in enumerate(ex):
        n, prompt = len(e["input_ids"]), sum(label == -100 for label in e["labels"])
        assert (batch["labels"][i, prompt:n] != -100).all()  # the floor keeps every completion label
        assert batch["mask_weights"][i, :n].tolist() == pytest.approx(e["loss_mask"])
        assert batch["token_weights"][i, :n].tolist() == pytest.approx(e["token_weights"])
        assert (batch["mask_weights"][i, n:] == 0).all()
    assert (batch["mask_weights"] == FLOOR).sum() > 0
    hard = CusetCollator(pad_token_id=0, weighting="cuset")(_examples()[:2])
    assert set(hard["mask_weights"].unique().tolist()) == {0.0, 1.0}  # a hard mask: m_t is 0 or 1
    for mode in ("plain", "region"):
        plain = CusetCollator(pad_token_id=0, weighting=mode)(ex)
        assert "mask_weights" not in plain
        assert torch.equal(plain["token_weights"], (plain["labels"] != -100).float())


def test_loss_divides_by_the_sum_of_m(tiny_model_dir: Path, tmp_path: Path) -> None:
    trainer = _trainer(tiny_model_dir, tmp_path)
    ex = _soft_examples()[:3]
    batch = trainer.data_collator(ex)
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, dict(batch)).item()
    with torch.no_grad():
        logits = trainer.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    logp = torch.log_softmax(logits[:, :-1].double(), -1)
    num, den = 0.0, 0.0
    for s, e in enumerate(ex):
        for t in range(1, len(e["input_ids"])):
            if e["labels"][t] == -100:
                continue
            num += e["sample_weight"] * e["token_weights"][t] * -logp[s, t - 1, e["input_ids"][t]].item()
            den += e["loss_mask"][t]
    assert den < sum(sum(label != -100 for label in e["labels"][1:]) for e in ex)  # some tokens at the floor
    assert loss == pytest.approx(num / den, rel=1e-5)


def test_the_window_count_is_the_sum_of_m(tiny_model_dir: Path, tmp_path: Path) -> None:
    trainer = _trainer(tiny_model_dir, tmp_path)
    batches = [trainer.data_collator([e]) for e in _soft_examples()[:4]]
    want = sum(sum(e["loss_mask"][1:]) for e in _soft_examples()[:4])
    got = trainer._get_num_items_in_batch(batches, torch.device("cpu"))
    assert float(got) == pytest.approx(want, rel=1e-6)  # type: ignore[arg-type]
    hard = [trainer.data_collator([e]) for e in _examples()[:4]]
    n_hard = sum(int((b["labels"][:, 1:] != -100).sum()) for b in hard)
    assert float(trainer._get_num_items_in_batch(hard, torch.device("cpu"))) == n_hard  # type: ignore[arg-type]


def test_the_count_is_summed_over_ranks_like_the_trainers(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ranks holding the same batches (a stand-in all-gather): the count, shortfall included, doubles."""
    trainer = _trainer(tiny_model_dir, tmp_path)
    batches = [trainer.data_collator(_soft_examples()[:2])]
    one = float(trainer._get_num_items_in_batch(batches, torch.device("cpu")))  # type: ignore[arg-type]
    monkeypatch.setattr(type(trainer.args), "world_size", property(lambda self: 2))
    monkeypatch.setattr(trainer.accelerator, "gather", lambda x: torch.stack([x, x]))
    assert trainer.args.average_tokens_across_devices
    two = float(trainer._get_num_items_in_batch(batches, torch.device("cpu")))  # type: ignore[arg-type]
    assert two == pytest.approx(2 * one, rel=1e-6)
    assert one == pytest.approx(sum(sum(e["loss_mask"][1:]) for e in _soft_examples()[:2]), rel=1e-6)


def test_accumulation_of_4x1_equals_one_batch_of_4_with_a_soft_mask(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_one_step, "_examples", _soft_examples)
    acc = one_step(tiny_model_dir, tmp_path / "acc", "cuset", batch=1, accum=4)
    big = one_step(tiny_model_dir, tmp_path / "big", "cuset", batch=4, accum=1)
    assert_same_step(acc, big, "cuset")
