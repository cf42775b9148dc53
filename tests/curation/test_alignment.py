"""The tokens training sees and the CuSeT weight rows match one to one (curate -> Parquet -> trainer).

    .venv/bin/python -m pytest tests/curation/test_alignment.py

Curates seed samples with the tiny model, writes the Parquet, reads it back through the train
stage's own path (load_curated, drop_unlearnable, build_trainer, the trainer's dataloader with
CusetCollator, truncation to max_length included) and checks every batch row against the curated
row it came from.
"""

from __future__ import annotations

from pathlib import Path

import torch

from kernelwright.curation.config import CurateConfig
from kernelwright.curation.samples import curate_samples, seed_samples
from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.prompting import prompt_messages
from kernelwright.training.config import TrainConfig
from kernelwright.training.data import drop_unlearnable, load_curated
from kernelwright.training.sft import build_trainer


def _chat_ids(tok, sample) -> list[int]:
    """The conversation through the tokenizer's own chat template, tokenised in one go."""
    messages = [*prompt_messages(sample.prompt), {"role": "assistant", "content": sample.completion}]
    out = tok.apply_chat_template(messages, tokenize=True)
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


def test_training_batches_match_curated_rows(tiny_model_dir: Path, tmp_path: Path) -> None:
    tok = load_tokenizer(tiny_model_dir)
    model = load_base_model(tiny_model_dir, device="cpu").eval()
    samples = {s.id: s for s in seed_samples("train")[:6]}
    # thresholds around the random model's p (~1/vocab) and alpha 2, so that the weights vary:
    # masked completion tokens (0), plain ones (1) and sensitive confident ones (2)
    cfg = CurateConfig(workdir=str(tmp_path / "wd"), p_cache=str(tmp_path / "p_t"), tau_high=0.001,
                       tau_low=0.0008, alpha=2.0, rho_max=1.0)
    data, _ = curate_samples(list(samples.values()), tok, model, cfg)
    rows = data.to_dicts()
    weights = {w for r in rows for w, lab in zip(r["token_weights"], r["labels"], strict=True) if lab != -100}
    assert weights == {0.0, 1.0, 2.0}
    for row in rows:  # the exact chat format training uses
        assert row["input_ids"] == _chat_ids(tok, samples[row["id"]])
        n_prompt = row["prompt_len"]
        assert row["labels"] == [-100] * n_prompt + row["input_ids"][n_prompt:]
        assert len(row["token_weights"]) == len(row["loss_mask"]) == len(row["p"]) == len(row["input_ids"])
    (tmp_path / "curated").mkdir()
    data.write_parquet(tmp_path / "curated" / "data.parquet")

    lengths = sorted(len(r["input_ids"]) for r in rows)
    max_length = lengths[len(lengths) // 2]  # truncates about half of them
    tcfg = TrainConfig(data=str(tmp_path / "curated"), max_length=max_length, per_device_train_batch_size=3,
                       weighting="cuset", output_dir=str(tmp_path / "train"), workdir=str(tmp_path / "wd"))
    dataset, _ = load_curated(tmp_path / "curated")
    dataset = drop_unlearnable(dataset, max_length)
    trainer = build_trainer(tcfg, model, tok, dataset, tmp_path / "train")
    by_prefix = {tuple(r["input_ids"][:max_length]): r for r in rows}
    seen = 0
    for batch in trainer.get_train_dataloader():
        for r in range(batch["input_ids"].shape[0]):
            seen += 1
            _check_row(batch, r, by_prefix, max_length)
    assert seen == len(dataset) and 0 < seen <= len(rows)


def _check_row(batch: dict, r: int, by_prefix: dict, max_length: int) -> None:
    n = int(batch["attention_mask"][r].sum())
    ids = batch["input_ids"][r, :n].tolist()
    row = by_prefix[tuple(ids)]  # the curated row, cut at max_length
    assert ids == row["input_ids"][:max_length] and n == min(len(row["input_ids"]), max_length)
    labels = batch["labels"][r].tolist()
    weights = batch["token_weights"][r].tolist()
    for i in range(n):  # label i and weight i both belong to token i
        kept = row["loss_mask"][i] == 1
        assert labels[i] == (row["labels"][i] if kept else -100)
        assert labels[i] in (-100, ids[i])
        assert weights[i] == torch.tensor(row["token_weights"][i], dtype=torch.float32).item()
        assert labels[i] != -100 or weights[i] == 0.0
    assert all(v == -100 for v in labels[n:]) and all(w == 0.0 for w in weights[n:])  # padding
    assert batch["sample_weight"][r].item() == torch.tensor(row["sample_weight"], dtype=torch.float32).item()
