"""TRL SFT with the CuSeT-weighted loss (../shared/design/cuset.md).

    L = sum_s w_s * sum_t m_t * a_t * nll_t  /  sum_s sum_t m_t

The curated Parquet carries `token_weights` (m_t * a_t), `loss_mask` (m_t) and `sample_weight`
(w_s). The collator pads them with 0 beside `input_ids` and, in the modes that mask, turns the
labels of masked tokens into -100: then the Trainer's own `num_items_in_batch` counts exactly
sum m_t over the whole accumulation window (and all devices with
`average_tokens_across_devices`), and `plain` reduces to TRL's usual mean NLL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from trl import SFTTrainer
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

Weighting = Literal["plain", "token", "region", "cuset"]
WEIGHTINGS: tuple[str, ...] = ("plain", "token", "region", "cuset")
WEIGHT_COLUMNS = ("token_weights", "loss_mask", "sample_weight")


def _pad(rows: list[torch.Tensor], length: int, value: float) -> torch.Tensor:
    out = torch.full((len(rows), length), value, dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


@dataclass
class CusetCollator(DataCollatorForLanguageModeling):
    """TRL's LM collator plus the CuSeT columns, padded with 0 and truncated with `input_ids`.

    `weighting` decides what reaches the loss: `plain` all ones, `token` masking and alpha,
    `region` sample weights, `cuset` both.
    """

    weighting: str = "cuset"
    max_length: int | None = None

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        if self.max_length is not None:
            examples = [self._truncate(e) for e in examples]
        weights = [torch.tensor(e["token_weights"], dtype=torch.float32) for e in examples]
        masks = [torch.tensor(e["loss_mask"], dtype=torch.bool) for e in examples]
        sample_w = torch.tensor([float(e["sample_weight"]) for e in examples], dtype=torch.float32)
        base = [{k: e[k] for k in ("input_ids", "labels")} for e in examples]
        batch = super().torch_call(base)
        length = batch["input_ids"].shape[1]
        tw, lm = _pad(weights, length, 0.0), _pad(masks, length, False)
        labels = batch["labels"]
        batch["completion_tokens"] = (labels != -100).sum(dim=1)
        if self.weighting in ("token", "cuset"):
            labels = labels.masked_fill(~lm, -100)
            batch["labels"] = labels
            batch["token_weights"] = tw * (labels != -100)
        else:
            batch["token_weights"] = (labels != -100).float()
        use_sample_w = self.weighting in ("region", "cuset")
        batch["sample_weight"] = sample_w if use_sample_w else torch.ones_like(sample_w)
        return batch

    def _truncate(self, e: dict[str, Any]) -> dict[str, Any]:
        n = self.max_length
        return {**e, **{k: e[k][:n] for k in ("input_ids", "labels", "token_weights", "loss_mask")}}


class CusetSFTTrainer(SFTTrainer):
    """`SFTTrainer` whose `compute_loss` applies the CuSeT weights (TRL's fused LM head keeps memory flat).

    Logged per step, beside TRL's `loss`: `nll` (unweighted mean NLL of the same tokens),
    `masked_share` (share of completion tokens masked), `mean_sample_weight`, and the rebuilt
    `entropy` and `mean_token_accuracy`.
    """

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        columns: list[str] = list(self._signature_columns or [])  # type: ignore[has-type]
        self._signature_columns = [*columns, *WEIGHT_COLUMNS]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mode = "train" if self.model.training else "eval"
        token_w = inputs.pop("token_weights")
        sample_w = inputs.pop("sample_weight")
        completion_tokens = inputs.pop("completion_tokens")
        inputs["use_cache"] = False
        outputs = model(**inputs, fused_lm_head=True)
        nll = -outputs.log_probs  # (B, L-1), zero where the next label is -100
        weights = token_w[:, 1:].to(nll.dtype) * sample_w.to(nll.device, nll.dtype)[:, None]
        num_tokens = outputs.label_mask.sum() if num_items_in_batch is None else num_items_in_batch
        loss = (weights * nll).sum() / torch.as_tensor(num_tokens, device=nll.device).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * (self.accelerator.num_processes // self.get_tp_size())
        self._log_metrics(mode, inputs, outputs, nll, sample_w, completion_tokens)
        return (loss, outputs) if return_outputs else loss

    @torch.no_grad()
    def _log_metrics(self, mode, inputs, outputs, nll, sample_w, completion_tokens) -> None:
        gather = self.accelerator.gather_for_metrics
        metrics = self._metrics[mode]
        n_valid = gather(outputs.label_mask.sum()).sum()
        if n_valid > 0:
            metrics["nll"].append((gather(nll.detach().sum()).sum() / n_valid).item())
            metrics["entropy"].append((gather(outputs.entropy.detach().sum()).sum() / n_valid).item())
            metrics["mean_token_accuracy"].append((gather(outputs.is_top1.sum()).sum() / n_valid).item())
        n_completion = gather(completion_tokens.sum()).sum().clamp(min=1)
        metrics["masked_share"].append(1.0 - (n_valid / n_completion).item())
        metrics["mean_sample_weight"].append(gather(sample_w.float().mean()).mean().item())
        if mode == "train":
            self._total_train_tokens += gather(inputs["attention_mask"].sum()).sum().item()
        metrics["num_tokens"] = [self._total_train_tokens]
