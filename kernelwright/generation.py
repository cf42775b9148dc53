"""Generation with transformers: the sampling arguments of `generate`, and a batching backend.

`generate_kwargs` is the one place the sampling arguments of transformers' `generate` are made
(evaluation's `HFBackend` here, the kernel server's generation queue); `HFBackend` turns chat
prompts into completions, batching `model.generate` with left padding.

`HFBackend.complete` also says why each completion ended (`finish_reason`: "stop", "length" or "loop"),
so a candidate cut off at the budget or by a loop is told from one the model ended itself.

`LoopStop` ends a sequence caught in a repetition loop (its last `window` tokens repeat a unit of at
most `max_period` tokens: an op line written again and again, a name growing by `_op` forever), which
a small model sampled at a low temperature falls into; such a completion can only run to the token
budget and fail to parse, and in a batch it holds every other row until the budget. `ends_in_loop`
is the same test on one sequence. `LoopEnd` ends such a row with the end-of-sequence token instead,
for a caller whose `generate` call cannot be given a stopping criterion (TRL's GRPO rollouts:
`end_loops_with_eos`), so that what follows the row is cut as after any end of sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from rich.progress import Progress
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    StoppingCriteria,
    StoppingCriteriaList,
)

from kernelwright.loop_limits import LOOP_MAX_PERIOD, LOOP_WINDOW


def generate_kwargs(max_new_tokens: int, temperature: float, top_p: float | None, pad_token_id: int | None,
                    eos_token_id: int | None) -> dict[str, Any]:
    """The sampling arguments of `model.generate`: greedy (`do_sample` off) at temperature 0, else sampling at
    `temperature` with `top_p`. A None leaves that setting to the model's generation config (top_k always)."""
    sample = temperature > 0
    return {"max_new_tokens": max_new_tokens, "do_sample": sample, "temperature": temperature if sample else None,
            "top_p": top_p if sample else None, "top_k": None, "pad_token_id": pad_token_id,
            "eos_token_id": eos_token_id}


def ends_in_loop(ids: Sequence[int], window: int = LOOP_WINDOW, max_period: int = LOOP_MAX_PERIOD) -> bool:
    """Whether the last `window` tokens of `ids` repeat one unit of at most `max_period` tokens."""
    if len(ids) < window:
        return False
    return bool(periodic(torch.tensor([list(ids[-window:])]), max_period)[0])


PERIODIC_CHUNK_ROWS = 256  # rows compared at once: 256 x 64 periods x 256 tokens is 4M elements


def periodic(tail: torch.Tensor, max_period: int) -> torch.Tensor:
    """Per row of `tail` (rows x window): whether the row equals itself shifted by some period <= max_period.
    On a GPU every period at once (~20 kernels a generation step instead of ~320 launches, one shift at a
    time); on a CPU one shift at a time, which moves 64x less data and is the faster there."""
    if tail.is_cuda:
        return periodic_all_shifts(tail, max_period)
    return periodic_each_shift(tail, max_period)


def periodic_each_shift(tail: torch.Tensor, max_period: int) -> torch.Tensor:
    """`periodic`, comparing the rows with one shift at a time."""
    found = torch.zeros(tail.shape[0], dtype=torch.bool, device=tail.device)
    for p in range(1, min(max_period, tail.shape[1] - 1) + 1):
        found |= (tail[:, p:] == tail[:, :-p]).all(dim=1)
    return found


def periodic_all_shifts(tail: torch.Tensor, max_period: int) -> torch.Tensor:
    """`periodic`, comparing the rows with every shift at once (in chunks of PERIODIC_CHUNK_ROWS rows)."""
    rows, width = tail.shape
    periods = min(max_period, width - 1)
    if periods < 1 or rows == 0:
        return torch.zeros(rows, dtype=torch.bool, device=tail.device)
    shift = torch.arange(1, periods + 1, device=tail.device)[:, None]  # (periods, 1)
    at = torch.arange(width, device=tail.device)[None, :]  # (1, width)
    past_end = at + shift >= width  # compared positions beyond the window: no constraint
    index = (at + shift).clamp(max=width - 1)
    parts = []
    for chunk in tail.split(PERIODIC_CHUNK_ROWS):
        same = (chunk[:, index] == chunk[:, None, :]) | past_end  # (rows, periods, width)
        parts.append(same.all(dim=2).any(dim=1))
    return torch.cat(parts)


class LoopStop(StoppingCriteria):
    """Per row: done once its last `window` new tokens repeat one unit of at most `max_period` tokens."""

    def __init__(self, prompt_len: int, window: int = LOOP_WINDOW, max_period: int = LOOP_MAX_PERIOD) -> None:
        self.prompt_len, self.window, self.max_period = prompt_len, window, max_period

    def looping(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        """Per row, whether it is caught in a loop; None while fewer than `window` new tokens are there."""
        if input_ids.shape[1] - self.prompt_len < self.window:
            return None
        return periodic(input_ids[:, -self.window:], self.max_period)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        found = self.looping(input_ids)
        if found is None:
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]
        return found  # type: ignore[return-value]


class LoopEnd(LogitsProcessor):
    """Per row: once its last `window` new tokens repeat one unit of at most `max_period` tokens, the next
    token can only be `eos` (every other score -inf)."""

    def __init__(self, prompt_len: int, eos_token_id: int, window: int = LOOP_WINDOW,
                 max_period: int = LOOP_MAX_PERIOD) -> None:
        self.loops, self.eos = LoopStop(prompt_len, window, max_period), eos_token_id

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        looping = self.loops.looping(input_ids)
        if looping is None:
            return scores
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.eos] = 0.0
        return torch.where(looping[:, None], forced, scores)  # type: ignore[return-value]


def end_loops_with_eos(model: PreTrainedModel, eos_token_id: int) -> None:
    """Make every later `model.generate` call end rows caught in a repetition loop with `eos_token_id`
    (`LoopEnd`, added to the call's own logits processors)."""
    generate = model.generate

    def generate_ending_loops(*args: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("input_ids", args[0] if args else None)
        width = 0 if ids is None else int(ids.shape[1])
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(LoopEnd(width, eos_token_id))
        return generate(*args, logits_processor=processors, **kwargs)

    model.generate = generate_ending_loops  # type: ignore[method-assign]


FINISH_REASONS = ("stop", "length", "loop")


@dataclass(frozen=True)
class Completion:
    text: str
    # "stop": the model ended it (end of sequence); "length": max_new_tokens reached; "loop": LoopStop ended it
    # in a repetition loop before the budget
    finish_reason: str
    new_tokens: int  # tokens generated, the end of sequence not counted


def finish_reason(row: Sequence[int], ends: set[int], max_new_tokens: int) -> tuple[str, int]:
    """Why one row of generated tokens ended, and how many it generated before its end: `ends` are the end of
    sequence and padding ids (a finished row of a batch is padded; padding may be the end-of-sequence token, so a
    row LoopStop ended looks like one that ended itself but for the loop before its end)."""
    n = next((i for i, t in enumerate(row) if t in ends), len(row))
    if n >= max_new_tokens:
        return "length", n
    if ends_in_loop(row[:n]) or n == len(row):  # no end of sequence short of the budget: a criterion ended it
        return "loop", n
    return "stop", n


@dataclass
class HFBackend:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    max_new_tokens: int = 512
    temperature: float = 0.0
    batch_size: int = 4
    seed: int = 0
    progress: Progress | None = None
    stop_loops: bool = True  # end a row caught in a repetition loop (LoopStop) instead of at the budget
    static_cache: bool = False  # a static KV cache: transformers compiles the decoding step on a GPU

    @torch.inference_mode()
    def _batch(self, prompts: list[str]) -> list[Completion]:
        tok = self.tokenizer
        tok.padding_side = "left"
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        width = enc["input_ids"].shape[1]
        stops = StoppingCriteriaList([LoopStop(width)] if self.stop_loops else [])
        cache = {"cache_implementation": "static"} if self.static_cache else {}
        out = self.model.generate(**enc, **generate_kwargs(self.max_new_tokens, self.temperature, None,
                                                           tok.pad_token_id, tok.eos_token_id),
                                  stopping_criteria=stops, **cache)
        new = out[:, width:]
        ends = {t for t in (tok.eos_token_id, tok.pad_token_id) if t is not None}
        finished = [finish_reason(row, ends, self.max_new_tokens) for row in new.tolist()]
        texts = tok.batch_decode(new, skip_special_tokens=True)
        return [Completion(text, why, n) for text, (why, n) in zip(texts, finished, strict=True)]

    def generate(self, conversations: list[list[dict[str, str]]], samples: int = 1) -> list[list[str]]:
        """`samples` completions' texts per conversation."""
        return [[c.text for c in row] for row in self.complete(conversations, samples)]

    def complete(self, conversations: list[list[dict[str, str]]], samples: int = 1) -> list[list[Completion]]:
        """`samples` completions per conversation, with why each ended."""
        torch.manual_seed(self.seed)
        prompts = [
            str(self.tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False))
            for c in conversations
        ]
        flat = [p for p in prompts for _ in range(samples)]
        task = self.progress.add_task("generating", total=len(flat)) if self.progress else None
        done: list[Completion] = []
        for i in range(0, len(flat), self.batch_size):
            done += self._batch(flat[i:i + self.batch_size])
            if self.progress is not None and task is not None:
                self.progress.advance(task, len(flat[i:i + self.batch_size]))
        return [done[i * samples:(i + 1) * samples] for i in range(len(prompts))]
