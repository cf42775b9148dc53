"""TRL SFT with the CuSeT-weighted loss (docs/cuset.md).

    L = sum_s w_s * sum_t m_t * a_t * nll_t  /  sum_s sum_t m_t

The curated Parquet carries `token_weights` (m_t * a_t), `loss_mask` (m_t: 1 kept, 0 masked, or
the soft `mask_floor` in (0, 1) for a masked token that stays in the loss) and `sample_weight`
(w_s). The collator pads them with 0 beside `input_ids` and, in the modes that mask, turns the
labels of tokens with m_t = 0 into -100: then the Trainer's own `num_items_in_batch` counts the
tokens with m_t > 0 over the whole accumulation window (and all devices with
`average_tokens_across_devices`). With a soft mask the tokens at the floor count m_t, not 1: the
collator hands m_t on as `mask_weights` and `_get_num_items_in_batch` takes the shortfall off,
so the denominator is exactly sum m_t. `plain` reduces to TRL's usual mean NLL.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
from trl import SFTConfig, SFTTrainer
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from kernelwright.model_card import write_model_card

WEIGHT_COLUMNS = ("token_weights", "loss_mask", "sample_weight")


def checkpointing_args(on: bool) -> dict[str, bool]:
    """`SFTConfig` keywords that turn activation checkpointing on or off: transformers >= 5.2x renamed
    `gradient_checkpointing` to `activation_checkpointing` (and warns on the old name, which TRL sets); older 5.x
    has only the old name."""
    names = {f.name for f in fields(SFTConfig)}
    return {n: on for n in ("gradient_checkpointing", "activation_checkpointing") if n in names}


def _pad(rows: list[torch.Tensor], length: int, value: float) -> torch.Tensor:
    out = torch.full((len(rows), length), value, dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _on(device: torch.device, x: torch.Tensor | int) -> torch.Tensor:
    """A float32 scalar on `device`, made there (a host-to-device copy would wait for the stream)."""
    return x.to(device, torch.float32) if isinstance(x, torch.Tensor) else torch.full((), float(x), device=device)


@dataclass
class CusetCollator(DataCollatorForLanguageModeling):
    """TRL's LM collator plus the CuSeT columns, padded with 0 and truncated with `input_ids`.

    `weighting` decides what reaches the loss: `plain` all ones, `token` masking and alpha,
    `region` sample weights, `cuset` both.
    """

    weighting: str = "cuset"
    max_length: int | None = None

    @property
    def masks(self) -> bool:
        """Whether this weighting applies the token mask m_t."""
        return self.weighting in ("token", "cuset")

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        if self.max_length is not None:
            examples = [self._truncate(e) for e in examples]
        weights = [torch.tensor(e["token_weights"], dtype=torch.float32) for e in examples]
        masks = [torch.tensor(e["loss_mask"], dtype=torch.float32) for e in examples]
        sample_w = torch.tensor([float(e["sample_weight"]) for e in examples], dtype=torch.float32)
        base = [{k: e[k] for k in ("input_ids", "labels")} for e in examples]
        batch = super().torch_call(base)
        length = batch["input_ids"].shape[1]
        tw, lm = _pad(weights, length, 0.0), _pad(masks, length, 0.0)
        labels = batch["labels"]
        batch["completion_tokens"] = (labels != -100).sum(dim=1)
        if self.masks:
            labels = labels.masked_fill(lm == 0, -100)
            batch["labels"] = labels
            batch["token_weights"] = tw * (labels != -100)
            batch["mask_weights"] = lm * (labels != -100)  # m_t where the loss sees the token, 0 elsewhere
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

    Logged per step, beside TRL's `loss` (the weighted loss): `nll` (unweighted mean NLL of the same
    tokens), `masked_share` (share of completion tokens masked), `mean_sample_weight`, and the rebuilt
    `entropy` and `mean_token_accuracy`, all as means over the whole accumulation window (so they do
    not depend on how a step's samples are split into micro-batches), read back with one device sync
    per micro-batch.
    """

    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        """kernelwright's card in the output folder, not TRL's hub draft (model_card.py)."""
        write_model_card(self, "train")

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        columns: list[str] = list(self._signature_columns or [])  # type: ignore[has-type]
        self._signature_columns = [*columns, *WEIGHT_COLUMNS]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mode = "train" if self.model.training else "eval"
        token_w = inputs.pop("token_weights")
        sample_w = inputs.pop("sample_weight")
        completion_tokens = inputs.pop("completion_tokens")
        mask_w = inputs.pop("mask_weights", None)
        inputs["use_cache"] = False
        outputs = model(**inputs, fused_lm_head=True)
        nll = -outputs.log_probs  # (B, L-1) float32, zero where the next label is -100
        weights = token_w[:, 1:].to(nll.dtype) * sample_w.to(nll.device, nll.dtype)[:, None]
        m = None if mask_w is None else mask_w[:, 1:].to(nll.device, nll.dtype)  # m_t, lined up with nll
        if num_items_in_batch is not None:
            num_tokens = num_items_in_batch
        else:
            num_tokens = outputs.label_mask.sum() if m is None else m.sum()
        loss = (weights * nll).sum() / torch.as_tensor(num_tokens, device=nll.device).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * (self.accelerator.num_processes // self.get_tp_size())
        self._log_metrics(mode, inputs, outputs, nll, m, sample_w, completion_tokens, num_items_in_batch)
        return (loss, outputs) if return_outputs else loss

    def _get_num_items_in_batch(self, batch_samples: list, device: torch.device) -> torch.Tensor | int | None:
        """The Trainer's count of the tokens the loss sees, less what soft-masked tokens fall short of 1: sum m_t.

        The shortfall, sum (1 - m_t) over the tokens with a label, is gathered and divided the way the
        Trainer treats its count (every rank collates the same way, so every rank joins the gather). It is
        0 with a hard mask, and the batches of the modes that do not mask carry no `mask_weights`.
        """
        num = super()._get_num_items_in_batch(batch_samples, device)
        if num is None or not batch_samples or "mask_weights" not in batch_samples[0]:
            return num
        short = torch.stack([((b["labels"][..., 1:] != -100).float() - b["mask_weights"][..., 1:].float()).sum()
                             .to(device) for b in batch_samples]).sum()
        if self.args.average_tokens_across_devices and self.args.world_size > 1:
            short = self.accelerator.gather(short).sum()
        elif self.args.n_gpu > 1:
            short = short / self.args.n_gpu
        return num - short / (self.get_tp_size() * self.get_cp_size() * self.get_sp_size())

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """Also count the accumulation window's completion tokens and samples (for window-exact metrics)."""
        batches, num_items_in_batch = super().get_batch_samples(epoch_iterator, num_batches, device)
        if batches and "completion_tokens" in batches[0]:
            self._window = (sum(b["completion_tokens"].sum() for b in batches),
                            sum(b["sample_weight"].numel() for b in batches))
        return batches, num_items_in_batch

    @torch.no_grad()
    def _log_metrics(self, mode, inputs, outputs, nll, m, sample_w, completion_tokens, num_items_in_batch) -> None:
        """Per-micro-batch sums over per-window counts, gathered and read back with ONE device sync.

        `m`: the token mask m_t lined up with `nll` (None: 1 wherever there is a label). Token metrics are
        m-weighted means, over sum m_t like the loss; a token counts as masked when its m_t is below 1.

        In training each metric is the micro-batch's sum divided by the count over the whole accumulation
        window, times the window's number of micro-batches, so that the mean over the window (what `log`
        reports) is the mean over the window's tokens or samples, like `loss`: gradient accumulation of
        4 x 1 logs exactly what one batch of 4 logs.
        """
        label_mask = outputs.label_mask
        m = label_mask.to(nll.dtype) if m is None else m
        kept = (m == 1).sum()
        window: tuple[torch.Tensor, int] | None = getattr(self, "_window", None)
        in_window = mode == "train" and num_items_in_batch is not None and window is not None
        if in_window and window is not None:
            n_tokens, n_completion, n_samples = torch.as_tensor(num_items_in_batch), window[0], window[1]
        else:
            n_tokens, n_completion, n_samples = m.sum(), completion_tokens.sum(), sample_w.numel()
        sums = ((m * nll.detach()).sum(), (m * outputs.entropy.detach()).sum(), (m * outputs.is_top1).sum(),
                completion_tokens.sum() - kept, sample_w.sum(), inputs["attention_mask"].sum(),
                n_tokens, n_completion, n_samples)
        local = torch.stack([_on(nll.device, t) for t in sums])
        rows = self.accelerator.gather_for_metrics(local[None]).tolist()  # the one sync
        nll_s, ent_s, top1_s, masked, w_sum, attended = (sum(r[i] for r in rows) for i in range(6))
        # `num_items_in_batch` already counts every rank when tokens are averaged across devices
        shared = in_window and self.args.average_tokens_across_devices
        tokens = rows[0][6] if shared else sum(r[6] for r in rows)
        completion, samples = (sum(r[i] for r in rows) for i in (7, 8))
        scale = getattr(self, "current_gradient_accumulation_steps", 1) if in_window else 1
        metrics = self._metrics[mode]
        for name, num, den in (("nll", nll_s, tokens), ("entropy", ent_s, tokens),
                               ("mean_token_accuracy", top1_s, tokens), ("masked_share", masked, completion),
                               ("mean_sample_weight", w_sum, samples)):
            metrics[name].append(num * scale / max(den, 1.0))
        if mode == "train":
            self._total_train_tokens += int(attended)
        metrics["num_tokens"] = [self._total_train_tokens]
