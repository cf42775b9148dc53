"""The `hf` backend's generation queue without continuous batching: waiting requests share one `generate`.

One worker thread takes the request at the head of the queue and, with it, every waiting request
whose sampling is compatible (`batch_key`: greedy requests together; sampled ones with the same
temperature and top_p; a sampled request with a seed always alone, so its seed draws the same
tokens whatever else waits), while the rows (candidates) of the batch stay within
`max_batch_sequences`. Their prompts go into one left-padded `generate` call with the largest token
budget of the batch; each row stops at its own budget or end-of-sequence token (`_RowsDone`, a
per-row stopping criterion, so the call ends when every row has), and its tokens are cut there.
With `stop_loops` (on by default) a row caught in a repetition loop (`generation.LoopStop`'s test, of
`loop_limits.LOOP_TEST`) stops there too, instead of holding its batch to the budget; its completion
ends in the loop, as evaluation's do.

With `static_cache` the call uses a static KV cache, whose decoding step transformers compiles on an
accelerator once per shape (batch rows, cache length): so the rows are padded to `max_batch_sequences`
(0: to a power of two) with filler rows that are done from the start (`padded_rows`), and the cache to
a multiple of `STATIC_CACHE_STEP` tokens (`static_budget`: the call's token budget grows to fill it,
each row still stops at its own). Transformers never shrinks a model's static cache length between
calls, so a server meets one row count and at most a handful of cache lengths, not a shape per batch
(a decoding step for a few rows costs about what one for all of them does: it is host-bound).
`warm_up` makes one call of a default request's shape before the first request, so it is compiled then.

Streamed requests get their tokens as each step makes them (`_RowStreamer`). A request whose
caller is cancelled (its client went away) has its rows marked done at the next step; the other
rows of its batch go on. Results and tokens come back on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import StoppingCriteria, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from kernelwright.generation import LoopStop, generate_kwargs
from kernelwright.serving.backend import EngineBusy, Sampling

log = logging.getLogger(__name__)
JOIN_TIMEOUT_S = 10.0
# what a job's events carry: a streamed token, the finished rows' tokens, or the error that failed the batch
Event = int | list[list[int]] | BaseException


STATIC_CACHE_STEP = 1024  # a static cache's length is a multiple of this many tokens
WARM_UP_TOKENS = 2  # tokens a row of the warm-up call makes: the first decoding step is where the compile happens


def padded_rows(rows: int, max_batch_sequences: int) -> int:
    """The rows a static-cache call is padded to: `max_batch_sequences` where `rows` fit (0, or a request with
    more candidates than that: the power of two at or above `rows`)."""
    return max_batch_sequences if rows <= max_batch_sequences else 1 << max(rows - 1, 0).bit_length()


def static_budget(width: int, budget: int, step: int = STATIC_CACHE_STEP) -> int:
    """The new tokens a static-cache call is given so that prompt width plus it is a multiple of `step`, at least
    `budget`."""
    return -(-(width + budget) // step) * step - width


def batch_key(sampling: Sampling) -> tuple[Any, ...] | None:
    """Requests with equal keys can share a generate call; None: this one runs alone."""
    if sampling.temperature <= 0:
        return ("greedy",)  # a seed changes nothing when greedy
    if sampling.seed is not None:
        return None
    return ("sample", float(sampling.temperature), float(sampling.top_p))


@dataclass(eq=False)
class Job:
    """One request's prompts (token ids), its sampling, and where its tokens and results go."""

    prompts: list[list[int]]
    sampling: Sampling
    streaming: bool
    loop: asyncio.AbstractEventLoop | None  # None: the queue's own warm-up, which waits on `answered`
    events: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    closed: bool = False  # cut short by the queue's close
    cache_budget: int | None = None  # the warm-up's: the call's new tokens before padding, beyond its rows' own
    answered: threading.Event = field(default_factory=threading.Event)  # set with the warm-up's result or error

    def post(self, event: Event) -> None:
        """Hand an event to the caller's loop (from the worker thread); a closed loop means the caller is gone."""
        if self.loop is None:
            if not isinstance(event, int):
                self.answered.set()
            return
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:
            self.cancelled.set()

    async def result(self) -> list[list[int]]:
        """Each prompt's generated tokens (streamed tokens are skipped); the batch's error is raised."""
        while True:
            event = await self.events.get()
            if isinstance(event, BaseException):
                raise event
            if isinstance(event, list):
                return event


def _shutting_down() -> EngineBusy:
    return EngineBusy("the server is shutting down: retry later")


def _cut(row: Sequence[int], budget: int, eos: int | None, loop_at: int | None = None) -> list[int]:
    """A row's tokens up to its own budget (or where it was caught in a loop), and up to and including its
    first end-of-sequence token."""
    tokens = list(row[:budget if loop_at is None else min(budget, loop_at)])
    if eos is not None and eos in tokens:
        return tokens[:tokens.index(eos) + 1]
    return tokens


class _RowsDone(StoppingCriteria):
    """Per row: done once it has its own budget of new tokens, its request was cancelled or (with
    `stop_loops`) it is caught in a repetition loop, whose length is kept in `loop_at`."""

    def __init__(self, width: int, budgets: list[int], cancelled: list[threading.Event], stop_loops: bool) -> None:
        self.width, self.budgets, self.cancelled = width, budgets, cancelled
        self.loops = LoopStop(width) if stop_loops else None
        self.loop_at: list[int | None] = [None] * len(budgets)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        made = input_ids.shape[1] - self.width
        looping = self.loops.looping(input_ids) if self.loops is not None else None
        if looping is not None:
            for i, caught in enumerate(looping.tolist()):
                if caught and self.loop_at[i] is None:
                    self.loop_at[i] = made
        done = [made >= b or c.is_set() or at is not None
                for b, c, at in zip(self.budgets, self.cancelled, self.loop_at, strict=True)]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]


class _RowStreamer(BaseStreamer):
    """Hands each new token of a streamed request's row to its caller until that row is done."""

    def __init__(self, owners: list[Job | None], budgets: list[int], eos: int | None,
                 loop_at: list[int | None]) -> None:
        self.owners, self.budgets, self.eos, self.loop_at = owners, budgets, eos, loop_at
        self.made = [0] * len(owners)
        self.done = [job is None or not job.streaming for job in owners]  # None: a static call's filler row

    def put(self, value: torch.Tensor) -> None:
        if value.dim() > 1:  # the prompt, given first
            return
        for i, token in enumerate(value.tolist()):
            if self.done[i] or self.loop_at[i] is not None:  # caught in a loop at the step before: padding now
                continue
            self.made[i] += 1
            job = self.owners[i]
            assert job is not None  # filler rows are done from the start
            job.post(int(token))
            self.done[i] = token == self.eos or self.made[i] >= self.budgets[i] or job.cancelled.is_set()

    def end(self) -> None:
        """The finished rows are posted by the worker once generate returns."""


class GenerateQueue:
    """Jobs waiting for the model, and the worker thread that batches and generates them."""

    def __init__(self, model: Any, eos: int | None, pad: int, max_batch_sequences: int,
                 stop_loops: bool = True, static_cache: bool = False) -> None:
        self.model, self.eos, self.pad, self.max_batch_sequences = model, eos, pad, max_batch_sequences
        self.stop_loops, self.static_cache = stop_loops, static_cache
        self._jobs: deque[Job] = deque()
        self._running: list[Job] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def submit(self, job: Job) -> None:
        with self._cond:
            self._stopping = False
            self._jobs.append(job)
            if self._thread is None:  # the first job, or the first since close: a fresh worker
                self._thread = threading.Thread(target=self._work, name="kernelwright-generate", daemon=True)
                self._thread.start()
            self._cond.notify()

    def close(self) -> None:
        """Fail the waiting jobs (503), cancel the running ones, and let the worker end; a later job starts one."""
        with self._cond:
            self._stopping = True
            waiting, self._jobs = list(self._jobs), deque()
            for job in self._running:
                job.closed = True
                job.cancelled.set()
            thread = self._thread
            self._cond.notify_all()
        for job in waiting:
            job.post(_shutting_down())
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT_S)

    def _take(self) -> list[Job] | None:
        """The head job and the waiting jobs that can share its generate call; None when the worker should end."""
        with self._cond:
            while True:
                while self._jobs and self._jobs[0].cancelled.is_set():
                    self._jobs.popleft()
                if self._jobs:
                    break
                if self._stopping:
                    self._thread = None
                    return None
                self._cond.wait()
            batch = [self._jobs.popleft()]
            key, rows = batch_key(batch[0].sampling), len(batch[0].prompts)
            if key is not None:
                for job in list(self._jobs):
                    fits = rows + len(job.prompts) <= self.max_batch_sequences
                    if fits and batch_key(job.sampling) == key and not job.cancelled.is_set():
                        self._jobs.remove(job)
                        batch.append(job)
                        rows += len(job.prompts)
            self._running = batch
            return batch

    def _work(self) -> None:
        while (batch := self._take()) is not None:
            try:
                rows = self._generate_or_fall_back(batch)
            except Exception as exc:  # the batch's callers get the error (a 500); the worker goes on
                log.exception("generation failed for a batch of %d requests", len(batch))
                for job in batch:
                    job.post(exc)
                continue
            finally:
                with self._cond:
                    self._running = []
            for job in batch:  # a job cut short by close gets no answer but that
                job.post(_shutting_down() if job.closed else rows[:len(job.prompts)])
                rows = rows[len(job.prompts):]

    def warm_up(self, prompt: list[int], budget: int) -> float | None:
        """With the static cache: one call of the shape a request of `budget` new tokens and a short prompt gets
        (rows padded as ever, the cache to `static_budget`; a longer prompt may need the next cache length), making
        `WARM_UP_TOKENS` tokens a row, so that transformers compiles its decoding step there and not in the first
        request's call. On the worker thread, as every call (compiled CUDA graphs belong to the thread that
        records them); this waits for it. The seconds it took; None without the static cache (or when it
        failed: the queue then generates with the dynamic cache)."""
        if not self.static_cache:
            return None
        start = time.perf_counter()
        job = Job([prompt], Sampling(max_new_tokens=WARM_UP_TOKENS), False, None, cache_budget=budget)
        self.submit(job)
        job.answered.wait()
        return time.perf_counter() - start if self.static_cache else None

    def _generate_or_fall_back(self, batch: list[Job]) -> list[list[int]]:
        """`_generate`; where a static-cache call fails (a transformers or model that cannot hold or compile one),
        the queue turns to the dynamic cache for good and makes the batch again, so a default never fails
        every request."""
        try:
            return self._generate(batch)
        except Exception:
            if not self.static_cache or any(job.cancelled.is_set() for job in batch):
                raise
            log.warning("a generate call with the static KV cache failed: generating with the dynamic cache from "
                        "now on (kv_cache dynamic)", exc_info=True)
            self.static_cache = False
            return self._generate(batch)

    @torch.inference_mode()
    def _generate(self, batch: list[Job]) -> list[list[int]]:
        owners: list[Job | None] = [job for job in batch for _ in job.prompts]
        prompts = [ids for job in batch for ids in job.prompts]
        budgets = [job.sampling.max_new_tokens for job in batch for _ in job.prompts]
        cancelled = [job.cancelled for job in batch for _ in job.prompts]
        real = len(prompts)
        if self.static_cache:  # filler rows: the first prompt, done from the start (budget 0)
            fill = padded_rows(real, self.max_batch_sequences) - real
            owners, prompts = owners + [None] * fill, prompts + [prompts[0]] * fill
            budgets, cancelled = budgets + [0] * fill, cancelled + [threading.Event() for _ in range(fill)]
        width = max(len(ids) for ids in prompts)
        device = self.model.device
        input_ids = torch.tensor([[self.pad] * (width - len(ids)) + ids for ids in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], device=device)
        sampling = batch[0].sampling
        if sampling.seed is not None and sampling.temperature > 0:  # alone in its batch (batch_key)
            torch.manual_seed(sampling.seed)
        rows_done = _RowsDone(width, budgets, cancelled, self.stop_loops)
        streaming = any(job.streaming for job in batch)
        streamer = _RowStreamer(owners, budgets, self.eos, rows_done.loop_at) if streaming else None
        if len(batch) > 1:
            log.debug("one generate call for %d requests (%d sequences)", len(batch), real)
        call_budget = max([*budgets, *(job.cache_budget or 0 for job in batch)])
        cache: dict[str, Any] = {}
        if self.static_cache:
            context = getattr(self.model.config, "max_position_embeddings", None)
            padded = static_budget(width, call_budget)  # within the context: a shape of its own where it is not
            call_budget = padded if not context or width + padded <= context else max(call_budget, context - width)
            cache = {"cache_implementation": "static"}
        out = self.model.generate(
            input_ids=input_ids, attention_mask=mask, streamer=streamer,
            **generate_kwargs(call_budget, sampling.temperature, sampling.top_p, self.pad, self.eos),
            stopping_criteria=StoppingCriteriaList([rows_done]), **cache)
        return [_cut(row, budget, self.eos, at)
                for row, budget, at in zip(out[:real, width:].tolist(), budgets[:real], rows_done.loop_at[:real],
                                           strict=True)]
