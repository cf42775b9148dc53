"""Base-model confidence p_t: the probability of each gold token under the frozen base model.

Teacher forcing over the exact token ids training will see (prompt + completion, chat format
included), batched by length; bf16 on a GPU, float32 on a CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from rich.progress import Progress
from transformers import PreTrainedModel


@torch.inference_mode()
def gold_token_probs(
    model: PreTrainedModel,
    sequences: Sequence[Sequence[int]],
    pad_id: int,
    batch_tokens: int = 16384,
    progress: Progress | None = None,
) -> list[list[float]]:
    """p_t for every position t >= 1 of every sequence (position 0 gets NaN: nothing predicts it).

    Sequences are sorted by length and packed into batches of at most `batch_tokens` padded
    tokens, so padding stays small; results come back in input order.
    """
    device = next(model.parameters()).device
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    out: list[list[float]] = [[] for _ in sequences]
    task = progress.add_task("base-model confidence", total=len(sequences)) if progress else None
    start = 0
    while start < len(order):
        longest = len(sequences[order[start]])
        end = start + 1
        while end < len(order) and len(sequences[order[end]]) * (end - start + 1) <= batch_tokens:
            end += 1
            longest = len(sequences[order[end - 1]])
        idx = order[start:end]
        ids = torch.full((len(idx), longest), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(idx):
            ids[row, : len(sequences[i])] = torch.tensor(sequences[i])
            mask[row, : len(sequences[i])] = 1
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        gold = logp.gather(-1, ids[:, 1:].to(device).unsqueeze(-1)).squeeze(-1).exp().cpu()
        for row, i in enumerate(idx):
            out[i] = [float("nan")] + gold[row, : len(sequences[i]) - 1].tolist()
        if progress is not None and task is not None:
            progress.advance(task, len(idx))
        start = end
    return out
