"""The CuSeT loss inside TRL's SFTTrainer, on a tiny random model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.training.cuset_trainer import CusetCollator, CusetSFTTrainer


def _examples() -> list[dict]:
    g = torch.Generator().manual_seed(0)
    out = []
    for n, prompt in ((12, 4), (9, 3)):
        ids = torch.randint(10, 200, (n,), generator=g).tolist()
        weights = [0.0] * prompt + [1.0, 2.0, 0.0, 1.0, 0.5] + [1.0] * (n - prompt - 5)
        mask = [0] * prompt + [1, 1, 0, 1, 1] + [1] * (n - prompt - 5)
        out.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:], "token_weights": weights,
                    "loss_mask": mask, "sample_weight": 1.5 if n == 12 else 0.5})
    return out


def _trainer(cls, model_dir: Path, tmp_path: Path, weighting: str = "plain", steps: int = 1):
    tok = load_tokenizer(model_dir)
    model = load_base_model(model_dir, dtype=torch.float32, device="cpu")
    args = SFTConfig(output_dir=str(tmp_path / cls.__name__), max_steps=steps, per_device_train_batch_size=2,
                     report_to=[], use_cpu=True, bf16=False, dataset_kwargs={"skip_prepare_dataset": True},
                     learning_rate=1e-2, logging_steps=1, save_strategy="no")
    ds = Dataset.from_list(_examples())
    collator = CusetCollator(pad_token_id=tok.pad_token_id, weighting=weighting)
    if cls is SFTTrainer:
        ds = ds.select_columns(["input_ids", "labels"])
        from trl.trainer.sft_trainer import DataCollatorForLanguageModeling
        collator = DataCollatorForLanguageModeling(pad_token_id=tok.pad_token_id)
    return cls(model=model, args=args, train_dataset=ds, processing_class=tok, data_collator=collator)


def test_collator_pads_weights_with_zero_and_truncates_together() -> None:
    ex = _examples()
    batch = CusetCollator(pad_token_id=0, weighting="cuset")(ex)
    assert batch["token_weights"].shape == batch["input_ids"].shape == (2, 12)
    assert batch["token_weights"][1, 9:].tolist() == [0.0, 0.0, 0.0]
    # masked token (loss_mask 0) loses its label in the masking modes
    assert batch["labels"][0, 6].item() == -100
    assert batch["sample_weight"].tolist() == [1.5, 0.5]
    short = CusetCollator(pad_token_id=0, weighting="cuset", max_length=6)(ex)
    assert short["input_ids"].shape == short["token_weights"].shape == (2, 6)
    assert short["token_weights"][0].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 2.0]


def test_plain_mode_ignores_weights() -> None:
    batch = CusetCollator(pad_token_id=0, weighting="plain")(_examples())
    assert batch["sample_weight"].tolist() == [1.0, 1.0]
    assert torch.equal(batch["token_weights"], (batch["labels"] != -100).float())


def test_plain_equals_stock_trl_loss(tiny_model_dir: Path, tmp_path: Path) -> None:
    ours = _trainer(CusetSFTTrainer, tiny_model_dir, tmp_path, "plain")
    stock = _trainer(SFTTrainer, tiny_model_dir, tmp_path)
    batch = ours.data_collator(_examples())
    stock_batch = stock.data_collator([{k: e[k] for k in ("input_ids", "labels")} for e in _examples()])
    ours.model.train()
    stock.model.train()
    loss_ours = ours.compute_loss(ours.model, dict(batch))
    loss_stock = stock.compute_loss(stock.model, dict(stock_batch))
    assert abs(loss_ours.item() - loss_stock.item()) < 1e-6


def test_cuset_loss_equals_hand_computation(tiny_model_dir: Path, tmp_path: Path) -> None:
    trainer = _trainer(CusetSFTTrainer, tiny_model_dir, tmp_path, "cuset")
    batch = trainer.data_collator(_examples())
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, dict(batch)).item()
    with torch.no_grad():
        logits = trainer.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    logp = torch.log_softmax(logits[:, :-1].double(), -1)
    num, den = 0.0, 0
    for s, ex in enumerate(_examples()):
        for t in range(1, len(ex["input_ids"])):
            if ex["labels"][t] == -100 or ex["loss_mask"][t] == 0:
                continue
            nll = -logp[s, t - 1, ex["input_ids"][t]].item()
            num += ex["sample_weight"] * ex["token_weights"][t] * nll
            den += 1
    assert loss == pytest.approx(num / den, abs=1e-5)


def test_parameters_change_after_training(tiny_model_dir: Path, tmp_path: Path) -> None:
    trainer = _trainer(CusetSFTTrainer, tiny_model_dir, tmp_path, "cuset", steps=2)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert len(changed) == len(before)
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"loss", "nll", "masked_share", "mean_sample_weight", "entropy", "mean_token_accuracy"} <= logged
