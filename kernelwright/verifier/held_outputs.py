"""The runner's timed outputs held on the GPU and read back as the judge's clock reads its own.

    kept = held_kept(link, reply, output_bytes)      # after a `time` request asked with hold=True

Without it (`VerifyConfig.held_timed_outputs` off; judges before version 22), the runner writes
every timed trial's output to the channel and the judge reads all of them back under the timing lock
(up to 100 of them). With it (the default), and where every output fits (`keep_all`), the runner
holds the trials' outputs and reports the sum of each (timing.checksum, taken right after the
trials); the judge then chooses which to read back, after the trials ran, as its clock does for a
counted batch (timing.checked_indices: the last and up to 7 others at random, within
WALL_CHECKED_BYTES), and each output read back must be the one summed: the candidate cannot know
which trials are checked, and an output changed after its sum was taken is `timing_inconsistent`.
The outputs read back are checked against the reference after the lock (judge_timing.check_timed),
as before.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernelwright.verifier.channel import ChannelBroken, field, load_output
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.timing import WARM_UP_CALLS, checked_indices, same_checksum

if TYPE_CHECKING:
    from kernelwright.verifier.link import Link


def held_kept(link: Link, reply: dict[str, Any], output_bytes: int,
              rng: random.Random | None = None) -> list[tuple[int, Any]]:
    """The outputs of the trials the judge chooses, from a `time` reply whose outputs the runner
    holds: every trial's output must be held with its sum, and each read back must match it."""
    trials = int(field(reply, "trials", int))
    held, sums = field(reply, "held", list), field(reply, "sums", list)
    if trials < 1 or held != list(range(WARM_UP_CALLS, WARM_UP_CALLS + trials)) or len(sums) != trials:
        raise ChannelBroken(f"{len(held)} outputs held and {len(sums)} sums for {trials} timed calls, "
                            "all of which were asked for")
    chosen = sorted(checked_indices(trials, output_bytes, rng or random.SystemRandom()))
    indices = [WARM_UP_CALLS + j for j in chosen]  # in the order the runner holds them
    entries = field(link.ask("save_timed", indices=indices), "kept", list)
    return summed_outputs(link, entries, indices, [sums[j] for j in chosen], "timed calls",
                          lambda i: f"timed call {i - WARM_UP_CALLS + 1}'s output changed after its timing ended: "
                                    "the output saved later differs from the one summed right after the trials")


def summed_outputs(link: Link, entries: list[Any], indices: list[int], sums: list[Any], what: str,
                   changed: Callable[[int], str]) -> list[tuple[int, Any]]:
    """The outputs a save reply's `entries` name, loaded on the host: they must be those of `indices`, in
    that order, and each the one whose sum the runner reported (`sums`, beside `indices`); one that is not
    is `timing_inconsistent` with `changed(index)`. Each is summed on the GPU, one at a time: on the host
    the sums' thread pools took ~1.8 CPU-s a candidate under the timing lock (H100, 16 workers, cProfile)."""
    import torch

    if [e[0] if isinstance(e, list) and len(e) == 2 and type(e[0]) is int else None for e in entries] != indices:
        raise ChannelBroken(f"the outputs of {what} {indices}, asked for, were not sent")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    kept = []
    for (i, header), claimed in zip(entries, sums, strict=True):
        out = load_output(header, link.outbox, "cpu")
        if not same_checksum(claimed, out.to(device) if type(out) is torch.Tensor else out):
            raise Rejected("timing_inconsistent", changed(i))
        kept.append((i, out))
    return kept
