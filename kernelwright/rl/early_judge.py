"""Rewards judged while the policy generates: each completion goes to the judge as its row ends.

    early = EarlyJudge(judge, scratch, decode, eos_ids, batch=verify_jobs)
    judge_rows_as_they_end(model, early)   # every later model.generate call reports rows as they end
    early.expect(inputs)                   # the dataset rows of the next generate call, in its order
    future = early.take((reference, candidate_source))   # the reward: a verdict started early, or None

TRL's GRPOTrainer makes a step's completions in one `generate` call and calls the reward once that
call returns, so without this the judge waits for the longest completion before it sees the first.
Here a logits processor watches the rows: a row whose last token is its end-of-sequence token is
decoded as TRL decodes it (its tokens up to that one, special tokens skipped), made into its
candidate file as the reward makes it (`candidate_source`), and once `batch` candidates wait they go
to the judge together on a background thread (`in_flight` batches at once, one by default) while the other
rows decode. The reward then takes each candidate's verdict from here where it was started, and
judges the rest (the rows that ended last) itself. A candidate's key is the reward's own
(reference, candidate source): a completion decoded otherwise than here is judged again by the
reward, never given another's verdict. The judge's runs share the GPU with generation, so its
contention handling (retimes, the verdict's contention note) applies to them;
`judge_while_generating: false` keeps judging after generation.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from kernelwright.rl.judge_reward import candidate_source, judge_pairs
from kernelwright.rl.judging import Judge
from kernelwright.verifier.verdict import Verdict

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (reference, candidate source): what the reward judges once


class EarlyJudge:
    def __init__(self, judge: Judge, scratch: Path, decode: Callable[[list[int]], str], eos_ids: Collection[int],
                 batch: int, in_flight: int = 1) -> None:
        self.judge, self.scratch, self.decode = judge, scratch, decode
        self.eos = sorted({int(t) for t in eos_ids})
        self.batch = max(1, batch)
        self.pool = ThreadPoolExecutor(max_workers=max(1, in_flight), thread_name_prefix="kw-early-judge")
        self._rows: list[dict[str, Any]] = []
        self._started: dict[Key, Future[Verdict]] = {}
        self._waiting: dict[Key, None] = {}  # in the order the rows ended
        self._lock = threading.Lock()

    def expect(self, rows: Sequence[dict[str, Any]]) -> None:
        """The dataset rows (phase, partial, reference) of the next generate call, one per completion, in order."""
        self._rows = list(rows)

    def processor(self, width: int, n_rows: int) -> RowsEnded | None:
        """The processor for a generate call of `n_rows` rows padded to `width` prompt tokens; None where the rows
        it was told to expect are not these (then the reward judges them all, as without it)."""
        rows, self._rows = self._rows, []
        if not self.eos or len(rows) != n_rows:
            return None
        return RowsEnded(self, rows, width)

    def ended(self, row: dict[str, Any], ids: list[int]) -> None:
        """A row ended with `ids` (its new tokens, the end-of-sequence token last): its candidate waits to be judged."""
        source, _ = candidate_source(self.decode(ids), str(row["phase"]), str(row["partial"]))
        if source is None:
            return  # no code: the reward's `no_candidate`, nothing to judge
        key = (str(row["reference"]), source)
        with self._lock:
            if key in self._started or key in self._waiting:
                return
            self._waiting[key] = None
            full = len(self._waiting) >= self.batch
        if full:
            self.flush()

    def flush(self) -> None:
        """The waiting candidates to the judge, together, on a background thread; once closed, none goes
        (the reward judges them itself, as it does every candidate not started here)."""
        with self._lock:
            keys, self._waiting = list(self._waiting), {}
        if not keys:
            return
        futures: list[Future[Verdict]] = [Future() for _ in keys]
        try:
            self.pool.submit(self._judge_batch, keys, futures)
        except RuntimeError:  # closed: no thread would ever set these futures
            return
        with self._lock:
            self._started.update(zip(keys, futures, strict=True))

    def take(self, key: Key) -> Future[Verdict] | None:
        """The verdict of `key` started early (a future), or None where it was not."""
        with self._lock:
            return self._started.pop(key, None)

    def reset(self) -> None:
        """After a batch's reward: what waits unsent and verdicts nobody took are let go."""
        with self._lock:
            self._waiting, self._started = {}, {}

    def close(self) -> None:
        """Batches not yet begun are dropped (nobody will take them), the one being judged is waited for."""
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _judge_batch(self, keys: list[Key], futures: list[Future[Verdict]]) -> None:
        try:
            verdicts = judge_pairs(self.judge, self.scratch, "early-", keys)
        except BaseException as exc:  # the reward's result() raises it, as the judge's own call would
            for future in futures:
                future.set_exception(exc)
            return
        for future, verdict in zip(futures, verdicts, strict=True):
            future.set_result(verdict)


class RowsEnded(LogitsProcessor):
    """Tells `early` of each row the step its last token is the end-of-sequence token (scores unchanged)."""

    def __init__(self, early: EarlyJudge, rows: list[dict[str, Any]], width: int) -> None:
        self.early, self.rows, self.width = early, rows, width
        self.done: torch.Tensor | None = None
        self.eos: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[1] <= self.width:
            return scores
        if self.done is None or self.eos is None:  # made once, on the rows' device
            self.done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            self.eos = torch.tensor(self.early.eos, device=input_ids.device)
        fresh = torch.isin(input_ids[:, -1], self.eos) & ~self.done
        if bool(fresh.any()):
            self.done |= fresh
            for r in fresh.nonzero().flatten().tolist():
                try:
                    self.early.ended(self.rows[r], input_ids[r, self.width:].tolist())
                except Exception:  # the reward judges this row after generation instead
                    log.exception("judging a finished row early failed; the reward will judge it")
        return scores


def judge_rows_as_they_end(model: Any, early: EarlyJudge) -> None:
    """Make every later `model.generate` call report its rows to `early` as they end (`RowsEnded`, added to
    the call's own logits processors), where `early` expected that call's rows."""
    generate = model.generate

    def generate_judging(*args: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("input_ids", args[0] if args else None)
        found = None if ids is None else early.processor(int(ids.shape[1]), int(ids.shape[0]))
        if found is None:
            return generate(*args, **kwargs)
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(found)
        return generate(*args, logits_processor=processors, **kwargs)

    model.generate = generate_judging
