"""Generation with transformers: the sampling arguments of `generate`, and a batching backend.

`generate_kwargs` is the one place the sampling arguments of transformers' `generate` are made
(evaluation's `HFBackend` here, the kernel server's generation queue); `HFBackend` turns chat
prompts into completions, batching `model.generate` with left padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from rich.progress import Progress
from transformers import PreTrainedModel, PreTrainedTokenizerBase


def generate_kwargs(max_new_tokens: int, temperature: float, top_p: float | None, pad_token_id: int | None,
                    eos_token_id: int | None) -> dict[str, Any]:
    """The sampling arguments of `model.generate`: greedy (`do_sample` off) at temperature 0, else sampling at
    `temperature` with `top_p`. A None leaves that setting to the model's generation config (top_k always)."""
    sample = temperature > 0
    return {"max_new_tokens": max_new_tokens, "do_sample": sample, "temperature": temperature if sample else None,
            "top_p": top_p if sample else None, "top_k": None, "pad_token_id": pad_token_id,
            "eos_token_id": eos_token_id}


@dataclass
class HFBackend:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    max_new_tokens: int = 512
    temperature: float = 0.0
    batch_size: int = 4
    seed: int = 0
    progress: Progress | None = None

    @torch.inference_mode()
    def _batch(self, prompts: list[str]) -> list[str]:
        tok = self.tokenizer
        tok.padding_side = "left"
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        out = self.model.generate(**enc, **generate_kwargs(self.max_new_tokens, self.temperature, None,
                                                           tok.pad_token_id, tok.eos_token_id))
        new = out[:, enc["input_ids"].shape[1]:]
        return tok.batch_decode(new, skip_special_tokens=True)

    def generate(self, conversations: list[list[dict[str, str]]], samples: int = 1) -> list[list[str]]:
        torch.manual_seed(self.seed)
        prompts = [
            str(self.tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False))
            for c in conversations
        ]
        flat = [p for p in prompts for _ in range(samples)]
        task = self.progress.add_task("generating", total=len(flat)) if self.progress else None
        texts: list[str] = []
        for i in range(0, len(flat), self.batch_size):
            texts += self._batch(flat[i:i + self.batch_size])
            if self.progress is not None and task is not None:
                self.progress.advance(task, len(flat[i:i + self.batch_size]))
        return [texts[i * samples:(i + 1) * samples] for i in range(len(prompts))]
