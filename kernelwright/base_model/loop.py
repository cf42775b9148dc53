"""The pretraining loop: next-token loss on shuffled blocks, a cosine schedule, checkpoints to resume from.

    .venv/bin/kernelwright base-model pretrain --size tiny --minutes 3    # runs it

Plain causal-LM loss (the model's own shifted cross-entropy over every position of a sequence),
AdamW, gradient clipping at 1, linear warm-up over `warmup_steps`, then half a cosine down to
`min_lr_ratio` of the peak. The schedule runs over `max_steps` steps or, with a time budget,
over the budget's seconds of training (so it ends where the time does, whatever the machine's
speed); with both, whichever ends first. `state.pt` in the checkpoint folder (model, optimizer,
step, blocks consumed, seconds spent, loss history) is written atomically every `checkpoint_s`
seconds and when the loop is interrupted; a run that finds it goes on from there, on the same
schedule and with the budget that was left. With `bf16`, the forward and backward run under
bfloat16 autocast (float32 weights and optimizer): on a CPU with AVX512-BF16 a tiny model's step
takes 0.75 of the float32 time, at the same loss per step.

Sequence-length curriculum (`short_share` > 0): the first part of the schedule trains on
`batch_size` single blocks a step (short sequences: many more optimizer steps for the same time,
which is what a small model's early loss follows), the rest on `units_per_sequence` consecutive
blocks joined into full-length sequences, as many as keep the tokens per step, so that every
position the curated samples reach has been trained.

Copying warm-up (`copy_steps` > 0): the first steps train on copying exercises only (short runs
of random tokens, repeated), which is what forms an induction head, the attention that looks
back to where the current tokens occurred before and predicts what followed them. Natural code
alone did not form one within the tiny size's budget; exercises mixed into the corpus at the
same time (`BlockSampler.copy_share`) keep it afterwards.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import mlflow
import torch
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from transformers import PreTrainedModel

from kernelwright import atomic
from kernelwright.base_model.tokenizer import BlockSampler

STATE_FILE = "state.pt"


@dataclass(frozen=True)
class LoopPlan:
    batch_size: int  # single blocks per step; sequences of several blocks: as many as keep the tokens
    learning_rate: float
    warmup_steps: int
    max_steps: int  # 0: until the time budget is spent
    budget_s: float  # seconds of training; 0: no limit (max_steps then required)
    checkpoint_s: float = 60.0
    log_every: int = 5
    min_lr_ratio: float = 0.1
    units_per_sequence: int = 1  # packed blocks joined into one full-length sequence
    short_share: float = 0.0  # share of the schedule trained on single blocks (short sequences) first
    bf16: bool = False  # bfloat16 autocast of the forward and backward
    copy_steps: int = 0  # first steps on copying exercises only (BlockSampler.copy_batch); 0: none
    copy_batch: int = 16  # exercises per warm-up step
    copy_width: int = 64  # tokens per warm-up exercise

    def units(self, position: float) -> int:
        """Blocks per sequence at this point of the schedule: one in the short phase, all after it."""
        return 1 if position < self.short_share else self.units_per_sequence

    def rows(self, units: int) -> int:
        """Sequences per step for sequences of `units` blocks: the tokens of `batch_size` blocks."""
        return max(self.batch_size // units, 1)


@dataclass
class LoopState:
    step: int = 0
    blocks: int = 0  # packed blocks consumed
    tokens: int = 0
    spent_s: float = 0.0  # seconds of training so far, over every run that resumed
    budget_s: float = 0.0  # the budget of the run that started it (kept by resumed runs)
    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, mean loss of the logging window)

    @property
    def last_loss(self) -> float:
        return self.losses[-1][1] if self.losses else float("nan")


def schedule_position(state: LoopState, plan: LoopPlan) -> float:
    """How far along the schedule the loop is, 0 to 1: by steps, by time, or the further of the two."""
    by_steps = state.step / plan.max_steps if plan.max_steps else 0.0
    by_time = state.spent_s / state.budget_s if state.budget_s else 0.0
    return min(max(by_steps, by_time), 1.0)


def cosine_lr(step: int, position: float, warmup: int, peak: float, min_ratio: float) -> float:
    """Linear warm-up over `warmup` steps, then half a cosine from `peak` (position 0) to `min_ratio * peak`
    (position 1)."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * position)))


def save_state(folder: Path, model: PreTrainedModel, opt: torch.optim.Optimizer, state: LoopState) -> None:
    with atomic.atomic_path(folder / STATE_FILE) as tmp:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "loop": asdict(state)}, tmp)


def load_state(folder: Path, model: PreTrainedModel, opt: torch.optim.Optimizer) -> LoopState:
    """The saved loop state (model and optimizer restored in place), or a fresh one."""
    path = folder / STATE_FILE
    if not path.is_file():
        return LoopState()
    saved = torch.load(path, map_location=next(model.parameters()).device, weights_only=False)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
    loop = saved["loop"]
    return LoopState(**{**loop, "losses": [tuple(x) for x in loop["losses"]]})


def make_optimizer(model: PreTrainedModel, lr: float) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)


def bf16_fast(device: torch.device) -> bool:
    """Whether bfloat16 autocast speeds training up here: a CUDA device, or a CPU with bf16 instructions."""
    return device.type == "cuda" or bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _step(model: PreTrainedModel, opt: torch.optim.Optimizer, ids: torch.Tensor, labels: torch.Tensor, lr: float,
          bf16: bool) -> float:
    for group in opt.param_groups:
        group["lr"] = lr
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=bf16):
        loss = model(input_ids=ids, labels=labels, use_cache=False).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())


OnStep = Callable[[LoopState], None]


def _done(state: LoopState, plan: LoopPlan) -> bool:
    return (bool(plan.max_steps) and state.step >= plan.max_steps) or (
        bool(state.budget_s) and state.spent_s >= state.budget_s)


def _progress() -> Progress:
    fields = "{task.percentage:>3.0f}%  step {task.fields[step]}  loss {task.fields[loss]:.3f}  " \
             "{task.fields[tps]:.0f} tok/s"
    return Progress(TextColumn("pretraining"), BarColumn(), TextColumn(fields), TimeElapsedColumn())


@dataclass
class _Window:
    """Losses since the last log line, and the learning rate of the last step."""

    losses: list[float] = field(default_factory=list)
    lr: float = 0.0

    def flush(self, state: LoopState, tokens_per_s: float) -> None:
        if not self.losses:
            return
        mean = sum(self.losses) / len(self.losses)
        state.losses.append((state.step, mean))
        self.losses = []
        if mlflow.active_run() is not None:
            mlflow.log_metrics({"loss": mean, "learning_rate": self.lr, "tokens": float(state.tokens),
                                "tokens_per_s": tokens_per_s}, step=state.step)


def _one(model: PreTrainedModel, opt: torch.optim.Optimizer, blocks: BlockSampler, plan: LoopPlan,
         state: LoopState, window: _Window) -> None:
    """One optimizer step on the next sequences; the state advanced."""
    t0 = time.perf_counter()
    device = next(model.parameters()).device
    position = schedule_position(state, plan)
    units = 0 if state.step < plan.copy_steps else plan.units(position)
    ids, labels = blocks.copy_batch(state.step, plan.copy_batch, plan.copy_width) if units == 0 else \
        blocks.batch(state.blocks, plan.rows(units), units)
    ids, labels = ids.to(device), labels.to(device)
    window.lr = cosine_lr(state.step, position, plan.warmup_steps, plan.learning_rate, plan.min_lr_ratio)
    window.losses.append(_step(model, opt, ids, labels, window.lr, plan.bf16))
    state.spent_s += time.perf_counter() - t0
    state.step += 1
    state.blocks += ids.shape[0] * units
    state.tokens += ids.numel()


def train_loop(model: PreTrainedModel, opt: torch.optim.Optimizer, blocks: BlockSampler, plan: LoopPlan,
               state: LoopState, folder: Path, on_step: OnStep | None = None) -> LoopState:
    """Train until the schedule ends (steps or budget); checkpoint into `folder`."""
    if not plan.max_steps and not plan.budget_s:
        raise ValueError("need max_steps or a time budget")
    state.budget_s = state.budget_s or plan.budget_s
    window, last_save = _Window(), time.perf_counter()
    model.train()
    with _progress() as progress:
        task: TaskID = progress.add_task("pretrain", total=100, step=state.step, loss=state.last_loss, tps=0.0)
        try:
            while not _done(state, plan):
                _one(model, opt, blocks, plan, state, window)
                tps = state.tokens / max(state.spent_s, 1e-9)
                if state.step % plan.log_every == 0:
                    window.flush(state, tps)
                progress.update(task, completed=100 * schedule_position(state, plan), step=state.step,
                                loss=state.last_loss, tps=tps)
                if on_step is not None:
                    on_step(state)
                if time.perf_counter() - last_save >= plan.checkpoint_s:
                    save_state(folder, model, opt, state)
                    last_save = time.perf_counter()
        except KeyboardInterrupt:
            save_state(folder, model, opt, state)
            raise
    window.flush(state, state.tokens / max(state.spent_s, 1e-9))
    save_state(folder, model, opt, state)
    return state
