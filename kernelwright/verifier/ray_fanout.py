"""Verification fanned out over a Ray cluster: one Ray task, in a fresh worker process, per candidate.

    kernelwright evaluate --ray auto                            # the cluster this machine is part of
    kernelwright evaluate --ray ray://head:10001 --ray-gpu-fraction 0.5
    kernelwright retrain --ray local                            # a Ray instance started here for the run

Each task verifies one candidate exactly as a local run does: `verify.run_worker` starts the
candidate's judge process (and the judge its runner) under the same time and memory limits, so the
verdicts are the same; only where they are reached differs. The task function has `max_calls=1`: Ray
starts a fresh worker process for every task, so nothing a candidate leaves in a process reaches the
next one. A task reserves `gpu_fraction` of one GPU (0.25 by default): builds take most of a
verification's time, so several candidates build side by side on one GPU, while timing stays one at a
time on each node: every task on a node takes the same timing lock file (`kw_timing_node_<uid>.lock`
in the node's temporary folder), where the workers of a local run share one lock file per run. GPU
memory is admitted per node as in a local run: a task waits in its node's ledger for its GPU
(`kw_gpu_memory_<uid>_<device>.json`, verifier/admission.py) until its memory estimate fits, and an
out-of-memory beside other tasks is verified again alone. The first task on a node builds torch's
precompiled header for the others (cuda/pch.py).

The problem and candidate files travel with each task, as bytes: a node that cannot read the driver's files
(no shared file system) verifies copies written to a temporary folder, and a build cache folder it
cannot create gives way to the node's default one. Every node needs kernelwright (the same version)
installed with what verification needs (CUDA torch, a compiler). A task whose worker dies (its node
lost, the process killed from outside) is tried once more; after that its verdict is `crash`.

Ray is an optional dependency (`pip install 'kernelwright[ray]'`), imported only when asked for.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelwright.cuda.pch import header_built_on_node
from kernelwright.errors import UsageError
from kernelwright.verifier import verify as verify_module
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.spec import Spec
from kernelwright.verifier.verdict import Verdict
from kernelwright.verifier.verify import OnDone

log = logging.getLogger(__name__)
LOCAL = "local"
DEFAULT_GPU_FRACTION = 0.25
RAY_HELP = ("Verify on a Ray cluster, one task (a fresh worker process) per candidate: auto (the cluster this "
            "machine belongs to), ray://HOST:10001 (Ray Client), HOST:6379, or local (start a Ray instance here "
            "for this run). Correctness and timing then need GPUs in the cluster, not here; kernelwright must be "
            "installed on every node. None: worker processes on this machine (--jobs).")
GPU_FRACTION_HELP = ("Share of one GPU each Ray task reserves, above 0 and at most 1: builds dominate, so 0.25 lets "
                     "four candidates build side by side on a GPU; timing stays one at a time per node.")
# verify.run_worker's signature: (spec, timeout_s, host_memory_gb) -> verdict
Worker = Callable[[Spec, float, float], Verdict]


def check_gpu_fraction(fraction: float) -> None:
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"ray_gpu_fraction is a share of one GPU, above 0 and at most 1, not {fraction}")


def import_ray() -> Any:
    """The `ray` module, or a UsageError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray, which is not installed: pip install 'kernelwright[ray]'") from None
    return ray


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


@contextmanager
def connected(address: str) -> Iterator[float]:
    """Connected to the Ray cluster at `address` (`local`: a new instance here) for the duration; yields the
    cluster's GPU count. A connection that is already open (ray.init by the caller) is used as it is."""
    ray = import_ray()
    if ray.is_initialized():
        yield float(ray.cluster_resources().get("GPU", 0.0))
        return
    try:
        if address == LOCAL:
            ray.init(address=LOCAL, include_dashboard=False)
        else:
            ray.init(address=address)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError, gRPC's: all mean no cluster
        raise UsageError(f"--ray {address}: cannot connect to a Ray cluster: {_first_line(exc)}") from None
    try:
        gpus = float(ray.cluster_resources().get("GPU", 0.0))
        log.info("connected to Ray at %s: %g GPUs", address, gpus)
        yield gpus
    finally:
        ray.shutdown()


def _reads_as(path: Path, source: bytes) -> bool:
    try:
        return path.read_bytes() == source
    except OSError:
        return False


def on_this_node(cfg: VerifyConfig, problem: bytes, candidate: bytes, scratch: Path) -> VerifyConfig:
    """`cfg` with paths this node can use: the driver's files where they read the same here, else copies of
    the files' bytes in `scratch` (bytes: a file Python decodes by its coding line stays that file); the node's
    default build cache where the driver's folder cannot be made."""
    changes: dict[str, Any] = {}
    for name, source in (("problem", problem), ("candidate", candidate)):
        path = Path(getattr(cfg, name))
        if not _reads_as(path, source):
            copy = scratch / name / path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(source)
            changes[name] = str(copy)
    if cfg.build_cache:
        try:
            Path(cfg.build_cache).mkdir(parents=True, exist_ok=True)
        except OSError:
            changes["build_cache"] = None
    return replace(cfg, **changes)


def verify_task(cfg: VerifyConfig, problem: bytes, candidate: bytes, worker: Worker) -> Verdict:
    """One candidate on the node this runs on (the body of the Ray task)."""
    import ray

    gpu_here = bool(ray.get_gpu_ids()) and verify_module.cuda_available()
    with tempfile.TemporaryDirectory(prefix="kw_ray_") as scratch:
        cfg = on_this_node(cfg, problem, candidate, Path(scratch))
        with header_built_on_node(cfg.timeout_s / 2, enabled=gpu_here) as pch_lock:
            spec = verify_module.make_spec(cfg, verify_module.host_timing_lock(), pch_lock)
            return worker(spec, cfg.timeout_s, cfg.host_memory_gb)


def _submitted(cfg: VerifyConfig) -> tuple[VerifyConfig, bytes, bytes]:
    problem, candidate = Path(cfg.problem).resolve(), Path(cfg.candidate).resolve()
    return replace(cfg, problem=str(problem), candidate=str(candidate)), problem.read_bytes(), candidate.read_bytes()


def verify_on_ray(cfgs: Sequence[VerifyConfig], gpu_fraction: float = DEFAULT_GPU_FRACTION,
                  on_done: OnDone | None = None, worker: Worker | None = None) -> list[Verdict]:
    """`verify.run_workers` over the connected Ray cluster (see the module doc): verdicts in the order of
    `cfgs`, for candidates that already passed `read_inputs` and the static checks. `worker` (default:
    `verify.run_worker` as this process has it) is sent with each task. `on_done(cfg, verdict)` is called
    here as each one lands."""
    if not cfgs:
        return []
    check_gpu_fraction(gpu_fraction)
    ray = import_ray()
    run = worker or verify_module.run_worker
    task = ray.remote(max_calls=1, max_retries=1)(verify_task)
    refs = {}
    for i, cfg in enumerate(cfgs):
        sent, problem, candidate = _submitted(cfg)
        name = f"kernelwright verify {Path(sent.candidate).parent.name}/{Path(sent.candidate).name}"
        refs[task.options(num_gpus=gpu_fraction, name=name).remote(sent, problem, candidate, run)] = i
    verdicts: list[Verdict | None] = [None] * len(cfgs)
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = refs[ref]
                try:
                    verdict = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    verdict = Verdict.of("crash", f"the Ray task ended without a verdict: {_first_line(exc)}")
                verdicts[i] = verdict
                if on_done is not None:
                    on_done(cfgs[i], verdict)
    finally:
        for ref in pending:  # interrupted: nothing is left running on the cluster
            with suppress(Exception):  # noqa: BLE001 - a task that ended meanwhile, a lost connection
                ray.cancel(ref, force=True)
    return [v for v in verdicts if v is not None]
