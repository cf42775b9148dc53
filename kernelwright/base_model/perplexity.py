"""Held-out perplexity of a base model on the seed test split (the tasks never trained on).

    .venv/bin/python -m kernelwright.base_model.perplexity .kernelwright/base-model   # one model's figures

Each held-out task is rendered as training renders it (chat template: the PyTorch reference as
the prompt, the fenced solution as the answer) and scored by teacher forcing. Only the answer's
tokens count. Per-token perplexity depends on the tokenizer, so the figure that compares models
with different tokenizers is `bits_per_char`: the answer's total negative log-likelihood in bits
over its number of characters.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from kernelwright.prompting import completion_text, prompt_messages
from kernelwright.seed import load_seed_tasks, split_tasks


@dataclass(frozen=True)
class Perplexity:
    samples: int
    tokens: int
    chars: int
    nll_per_token: float  # nats
    perplexity: float
    bits_per_char: float

    def as_metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}{k}": float(v) for k, v in asdict(self).items()}


def _answer_nll(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, reference: str,
                answer: str) -> tuple[float, int]:
    """(summed nll in nats, tokens) of the answer's tokens after the prompt."""
    messages = prompt_messages(reference)
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": answer}], tokenize=False)
    assert isinstance(prompt, str) and isinstance(full, str)
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tokenizer(full[len(prompt):], add_special_tokens=False)["input_ids"]
    device = next(model.parameters()).device
    ids = torch.tensor([list(p_ids) + list(a_ids)], device=device)
    with torch.inference_mode():
        logits = model(input_ids=ids, use_cache=False).logits[0, len(p_ids) - 1: -1].float()
    nll = torch.nn.functional.cross_entropy(logits, ids[0, len(p_ids):], reduction="sum")
    return float(nll), len(a_ids)


def heldout_perplexity(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Perplexity:
    """Perplexity and bits per character of the seed test split's answers."""
    _, test = split_tasks(load_seed_tasks())
    total, tokens, chars = 0.0, 0, 0
    model.eval()
    for task in test:
        answer = completion_text(task.solution)
        nll, n = _answer_nll(model, tokenizer, task.reference, answer)
        total, tokens, chars = total + nll, tokens + n, chars + len(answer)
    per_token = total / max(tokens, 1)
    return Perplexity(samples=len(test), tokens=tokens, chars=chars, nll_per_token=per_token,
                      perplexity=math.exp(per_token), bits_per_char=total / math.log(2) / max(chars, 1))


if __name__ == "__main__":
    import json
    import sys

    from kernelwright.models import load_base_model, load_tokenizer

    folder = Path(sys.argv[1])
    result = heldout_perplexity(load_base_model(folder, dtype=torch.float32), load_tokenizer(folder))
    json.dump(asdict(result), sys.stdout, indent=2)
