"""The `hf` backend with continuous batching (`batching: auto` or `continuous`, on a model whose layers
transformers' paged cache can hold: `paged_cache_refuses`): transformers' continuous batching.

One `ContinuousBatchingManager` (transformers' engine, from `model.init_continuous_batching`)
runs its generation loop on its own thread for the life of the backend. Every candidate of every
request is one sequence added to it (`add_request`); the engine schedules the tokens of all the
sequences in flight into shared forward passes (prompts prefilled in chunks of at most
`cb_max_batch_tokens`, whole cache blocks of a common prompt prefix shared). Results come back
on the event loop through the engine's `register_result_handler`, so no thread waits per
request: a future per sequence, or a queue of partial outputs when streaming.

Sampling is per sequence, through transformers' per-request logits processors
(`per_request_processors`): each sequence passes its own temperature and top_p; temperature 0
(greedy) passes top_k=1, which keeps only the highest-scoring token, so the engine's sampling
step can pick nothing else. The engine draws the sampled tokens of all sequences in a batch from
one shared random stream, so a per-request `seed` cannot be honoured with temperature > 0:
`check_sampling` refuses it (400 naming `seed`); with temperature 0 a seed changes nothing.

A caller that is cancelled (its client went away) cancels its sequences (`cancel_request`);
`close` stops the engine (`stop(block=True)`), as does letting go of the backend (the old
version after a model reload). An engine that stopped (closed, or ended by an error) is started
again by the next request.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.serving import metrics
from kernelwright.serving.backend import (
    Completion,
    EmptyPrompt,
    EngineBusy,
    Prompt,
    PromptTooLong,
    Sampling,
    SamplingRefused,
)

log = logging.getLogger(__name__)
# transformers builds a per-request processor only for a shared value that changes something (no temperature
# processor for 1.0, no top-p one for 1.0): these make it build them; every sequence then passes its own values
_SHARED_SAMPLING = {"temperature": 0.7, "top_p": 0.95}
# on a CPU the engine attends through a dense mask over every sequence of a forward pass, so a pass costs about
# the square of the sequences in it: 4 to 8 a pass measured best at 32 clients with the tiny model, unbounded the
# worst; 8 leaves larger models, whose passes are dominated by reading the weights, more to share
CPU_REQUESTS_PER_BATCH = 8
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
_LIVE: weakref.WeakSet[ContinuousBatchingBackend] = weakref.WeakSet()


class GenerationFailed(RuntimeError):
    """The engine failed a sequence (its error is logged; the client gets a 500)."""


@dataclass(frozen=True)
class EngineSizes:
    """The engine's sizes (`ServeConfig.cb_*`); 0 leaves one to transformers' own sizing."""

    num_blocks: int = 256
    page_size: int = 64
    max_batch_tokens: int = 256
    max_requests_per_batch: int = 0  # 0: CPU_REQUESTS_PER_BATCH on a CPU, transformers' default elsewhere
    prefix_sharing: bool = True

    def requests_per_batch(self, device: torch.device) -> int | None:
        if self.max_requests_per_batch:
            return self.max_requests_per_batch
        return CPU_REQUESTS_PER_BATCH if device.type == "cpu" else None


def paged_cache_refuses(config: Any) -> list[str]:
    """The layer types of a model that transformers' paged cache (continuous batching) cannot hold; [] when none.

    The engine's cache reads the text config's `layer_types` (none: every layer full attention, or
    sliding attention when it has a sliding window) and has an allocator for full and sliding attention
    only: another type (an LFM2 model's short convolutions, "conv") stops its start."""
    try:
        from transformers.generation.continuous_batching.cache import ATTN_TYPE_TO_ALLOCATOR

        held = set(ATTN_TYPE_TO_ALLOCATOR)
    except ImportError:  # another transformers layout: the two attention types the engine has always held
        held = {"full_attention", "sliding_attention"}
    layer_types = getattr(config.get_text_config(), "layer_types", None) or []
    return list(dict.fromkeys(str(t) for t in layer_types if t not in held))


def processor_kwargs(sampling: Sampling, vocab_size: int) -> dict[str, Any]:
    """What one sequence passes to the per-request processors (temperature, then top-k, then top-p)."""
    if sampling.temperature <= 0:
        return {"temperature": 1.0, "top_k": 1, "top_p": 1.0}
    return {"temperature": float(sampling.temperature), "top_k": vocab_size, "top_p": float(sampling.top_p)}


class TextDeltas:
    """Text deltas of a growing token list, decoded again only since the last line end.

    A delta ends at a space or a line end (as transformers' `TextStreamer` does), and nothing is
    sent while the text ends in an incomplete character; `rest` gives what is still held back."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer, self.start, self.sent, self.text = tokenizer, 0, 0, ""

    def update(self, tokens: Sequence[int]) -> str:
        self.text = str(self.tokenizer.decode(list(tokens[self.start:]), skip_special_tokens=True))
        if self.text.endswith("\ufffd"):
            return ""
        if self.text.endswith("\n"):
            piece = self.text[self.sent:]
            self.start, self.sent, self.text = len(tokens), 0, ""
            return piece
        end = max(self.sent, self.text.rfind(" ") + 1)
        piece, self.sent = self.text[self.sent:end], end
        return piece

    def rest(self) -> str:
        piece, self.sent = self.text[self.sent:], len(self.text)
        return piece


def _single_request_tokens(cache: Any, page_size: int) -> int:
    """The most tokens (prompt and new) one sequence can hold in the engine's empty cache."""
    try:
        from transformers.generation.continuous_batching.model_runner import infer_max_single_request_tokens
    except ImportError:  # another transformers layout: every block holds page_size tokens of every layer
        return int(cache.num_blocks) * page_size
    return int(infer_max_single_request_tokens(cache))


class ContinuousBatchingBackend:
    def __init__(self, model: Any, tokenizer: Any, sizes: EngineSizes = EngineSizes()) -> None:
        from transformers import GenerationConfig
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        self.model, self.tokenizer, self.sizes = model, tokenizer, sizes
        self.vocab_size = int(model.config.get_text_config().vocab_size)
        self.eos = -1 if tokenizer.eos_token_id is None else int(tokenizer.eos_token_id)  # -1: nothing ends early
        shared = GenerationConfig(do_sample=True, top_k=self.vocab_size, eos_token_id=self.eos,
                                  pad_token_id=tokenizer.pad_token_id, **_SHARED_SAMPLING)
        engine = ContinuousBatchingConfig(
            num_blocks=sizes.num_blocks or None, page_size=sizes.page_size,
            max_batch_tokens=sizes.max_batch_tokens or None,
            max_requests_per_batch=sizes.requests_per_batch(model.device), allow_block_sharing=sizes.prefix_sharing,
            per_request_processors=True, max_queue_size=0)  # 0: add_request never blocks (max_queue bounds /v1)
        self.manager = model.init_continuous_batching(generation_config=shared, continuous_batching_config=engine)
        self.live: set[str] = set()  # sequences in the engine, not finished nor cancelled
        self._lock = threading.Lock()
        self.capacity_tokens = self._start()
        _LIVE.add(self)
        weakref.finalize(self, _stop, self.manager, False)

    # ---- the engine ---------------------------------------------------------------------------------

    def _start(self) -> int:
        manager = self.manager
        with torch.inference_mode():  # the generation loop runs in the caller's inference mode
            manager.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while manager.batch_processor is None:
            if not manager.is_running() or time.monotonic() > deadline:
                fatal = manager.background_thread_status.fatal_error
                raise RuntimeError(f"the continuous-batching engine did not start: {fatal or 'timed out'}")
            time.sleep(0.005)
        cache = manager.batch_processor.cache
        capacity = _single_request_tokens(cache, manager.continuous_batching_config.page_size)
        log.info("continuous batching: %d cache blocks, %d tokens a forward pass, %d tokens per sequence at most",
                 cache.num_blocks, cache.max_batch_tokens, capacity)
        return capacity

    def _ensure_running(self) -> None:
        with self._lock:
            manager = self.manager
            if manager.is_running():
                if manager.background_thread_status.can_accept_new_requests() is not None:
                    raise EngineBusy("the generation engine is stopping: retry later")
                return
            fatal = manager.background_thread_status.fatal_error
            if fatal is not None:
                log.error("the continuous-batching engine ended on an error (%s): starting it again", fatal)
                manager.batch_processor = None  # a fresh cache and scheduler, not the state the error left
            manager.switch_to_cb_friendly_attn(self.model, manager.continuous_batching_config.auto_switch_to_flash)
            self.capacity_tokens = self._start()

    async def health(self) -> str | None:
        """The model is in this process; an engine that stopped on an error restarts at the next request."""
        return None

    def close(self) -> None:
        """Stop the engine (sequences still in it fail); a later request starts it again."""
        with self._lock:
            if self.manager.is_running():
                self.manager.stop(block=True, timeout=STOP_TIMEOUT_S, hard_stop=True)

    # ---- sequences ----------------------------------------------------------------------------------

    def check_sampling(self, sampling: Sampling) -> None:
        if sampling.seed is not None and sampling.temperature > 0:
            raise SamplingRefused("seed", "seed is not honoured with continuous batching when temperature > 0 (the "
                                  "sequences of a batch draw from one random stream): leave it out, set temperature "
                                  "0, or serve with --batching sequential")

    def _text(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        return str(self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False))

    def encode(self, prompt: Prompt, sampling: Sampling) -> list[int]:
        """The prompt's token ids; PromptTooLong when it and the token budget do not fit."""
        ids = list(self.tokenizer(self._text(prompt), add_special_tokens=False)["input_ids"])
        if not ids:
            raise EmptyPrompt("the prompt has no tokens: there is nothing to continue from")
        need, n = len(ids) + sampling.max_new_tokens, len(ids)
        context = getattr(self.model.config, "max_position_embeddings", None)
        if context and need > context:
            raise PromptTooLong(f"the prompt ({n} tokens) and max_new_tokens ({sampling.max_new_tokens}) "
                                f"exceed the model's context of {context} tokens")
        if need > self.capacity_tokens:
            raise PromptTooLong(f"the prompt ({n} tokens) and max_new_tokens ({sampling.max_new_tokens}) exceed the "
                                f"{self.capacity_tokens} tokens one completion may hold in this server's cache "
                                "(cb_num_blocks x cb_page_size)")
        return ids

    def _submit(self, ids: list[int], sampling: Sampling, streaming: bool, on_output: Callable[[Any], None]) -> str:
        self._ensure_running()
        rid = f"kw-{uuid.uuid4().hex}"

        def deliver(output: Any) -> None:  # on the event loop
            if output.is_finished():
                self._done(rid)
            on_output(output)

        self.manager.register_result_handler(rid, deliver)  # before add_request: a fast result is not missed
        added = self.manager.add_request(ids, request_id=rid, max_new_tokens=sampling.max_new_tokens,
                                         streaming=streaming, eos_token_id=self.eos,
                                         **processor_kwargs(sampling, self.vocab_size))
        if added is None:
            self._forget(rid)
            raise EngineBusy("the generation engine is stopping: retry later")
        self.live.add(rid)
        metrics.ENGINE_SEQUENCES.inc()
        return rid

    def _done(self, rid: str) -> bool:
        if rid not in self.live:
            return False
        self.live.discard(rid)
        metrics.ENGINE_SEQUENCES.dec()
        return True

    def _forget(self, rid: str) -> None:
        router = self.manager.output_router
        with router._lock:  # the engine drops a handler only once its sequence finishes; a cancelled one never does
            router.result_handlers.pop(rid, None)

    def cancel(self, rid: str) -> None:
        """Take a sequence out of the engine (it frees its cache at the next step)."""
        if self._done(rid):
            self.manager.cancel_request(rid)
            self._forget(rid)

    def _completion(self, n_prompt: int, output: Any, sampling: Sampling) -> Completion:
        if output.error is not None:
            log.error("the generation engine failed a sequence: %s", output.error)
            raise GenerationFailed(str(output.error))
        tokens = list(output.generated_tokens)
        text = str(self.tokenizer.decode(tokens, skip_special_tokens=True))
        ended = bool(tokens) and tokens[-1] == self.eos
        finish = "length" if not ended and len(tokens) >= sampling.max_new_tokens else "stop"
        return Completion(text, n_prompt, len(tokens), finish)

    async def generate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[Completion]:
        """Every prompt as one sequence of the engine; a cancelled caller cancels those not finished."""
        self.check_sampling(sampling)
        encoded = [self.encode(p, sampling) for p in prompts]
        loop = asyncio.get_running_loop()
        rids: list[str] = []
        futures: list[asyncio.Future[Any]] = []
        try:
            for ids in encoded:
                future: asyncio.Future[Any] = loop.create_future()
                rids.append(self._submit(ids, sampling, False, _resolver(future)))
                futures.append(future)
            outputs = await asyncio.gather(*futures)
        finally:
            for rid in rids:
                self.cancel(rid)  # a no-op for those that finished
        return [self._completion(len(ids), out, sampling) for ids, out in zip(encoded, outputs, strict=True)]

    async def stream(self, prompt: Prompt, sampling: Sampling) -> AsyncIterator[str | Completion]:
        """Text deltas as the engine makes tokens, then the whole completion."""
        self.check_sampling(sampling)
        ids = self.encode(prompt, sampling)
        outputs: asyncio.Queue[Any] = asyncio.Queue()
        rid = self._submit(ids, sampling, True, outputs.put_nowait)
        deltas = TextDeltas(self.tokenizer)
        try:
            while True:
                output = await outputs.get()
                while not outputs.empty():  # each output holds every token so far: the latest is enough
                    output = outputs.get_nowait()
                if output.error is not None or output.is_finished():
                    break
                if piece := deltas.update(output.generated_tokens):
                    yield piece
        finally:
            self.cancel(rid)
        done = self._completion(len(ids), output, sampling)
        if piece := deltas.update(output.generated_tokens) + deltas.rest():
            yield piece
        yield done


def _resolver(future: asyncio.Future[Any]) -> Callable[[Any], None]:
    def resolve(output: Any) -> None:
        if output.is_finished() and not future.done():
            future.set_result(output)

    return resolve


def _stop(manager: Any, block: bool) -> None:
    """Stop an engine whose backend is gone (or at exit): nothing waits for its results any more."""
    if not manager.is_running():
        return
    with manager.output_router._lock:
        manager.output_router.result_handlers.clear()  # results of sequences still in it go nowhere
    manager.stop(block=block, timeout=STOP_TIMEOUT_S, hard_stop=True)


def _stop_all() -> None:
    for backend in list(_LIVE):
        _stop(backend.manager, True)


# the engine's generation thread is not a daemon: stop it before the interpreter waits for such threads
# (atexit handlers run only after that wait)
getattr(threading, "_register_atexit", lambda fn: None)(_stop_all)
