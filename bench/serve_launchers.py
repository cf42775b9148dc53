"""Server launchers of the serving benchmark: the registered model and the three servers of it.

Used by `bench/serve_throughput.py`: `register_tiny_model` builds the tiny random model, and
`register_pipeline_model` takes the kind of base the pipeline makes (LFM2's shape, from
`kernelwright.base_model`: the tiny base under the work folder when there is one, else a micro
one pretrained now); either is registered in a local MLflow store as
models:/kernelwright-coder@champion. `launches` gives the command line, readiness path and request
builder of `kernelwright serve`, `mlflow models serve` and `transformers serve` of that version
(`--continuous-batching`, with `transformers serve` without it as the fallback when a probe request
fails: its continuous batching cannot hold every model); `Server` runs one in its own process group
on a loopback port, waits until it answers, and stops the whole group when its block ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serve_load import Body, Plan, chat_bodies, kernel_bodies, mlflow_bodies, prompts
from serve_stats import KW_OFF, KW_ON, MLFLOW, TF_SERVE

MODEL_NAME = "kernelwright-coder"
ALIAS = "champion"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerFailed(RuntimeError):
    pass


@dataclass
class Server:
    """A server process in its own process group, stopped (group and all) when the block ends."""

    name: str
    argv: list[str]
    env: dict[str, str]
    ready_url: str
    log_path: Path
    start_timeout_s: float
    proc: subprocess.Popen[bytes] | None = None
    startup_s: float | None = None

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def start(self) -> None:
        import httpx

        log = self.log_path.open("wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, process_group=0)
        log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerFailed(f"{self.name} exited with status {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.ready_url, timeout=2).status_code == 200:
                    self.startup_s = round(time.perf_counter() - t0, 2)
                    return
            time.sleep(0.25)
        raise ServerFailed(f"{self.name} was not ready at {self.ready_url} in {self.start_timeout_s:.0f} s: "
                           f"{self.log_tail()}")

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # the process group this script started
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    @contextlib.contextmanager
    def running(self) -> Iterator[Server]:
        try:
            self.start()
            yield self
        finally:
            self.stop()


@dataclass
class Registered:
    uri: str
    version: str
    checkpoint: Path  # the registered version's weights and tokenizer in one folder (for transformers serve)
    tokenizer: Any
    parameters: int
    build_s: float


def register_tiny_model(workdir: Path, max_new_tokens: int) -> Registered:
    """Build the tiny random model, log and register it in `workdir`'s MLflow store, alias @champion."""
    from kernelwright.models import build_tiny_model
    from kernelwright.seed import load_seed_tasks

    t0 = time.perf_counter()
    built = build_tiny_model(workdir / "tiny", [t.reference + "\n" + t.solution for t in load_seed_tasks()])
    return register_checkpoint(built, workdir, max_new_tokens, t0)


def pipeline_base(workdir: Path, base: Path | None) -> tuple[Path, str]:
    """A base of the pipeline's kind and where it came from: `base`, else the tiny base of the default work
    folder when it holds one, else a micro base pretrained now (`kernelwright.base_model`, half a minute)."""
    from kernelwright.base_model.pretrain import PretrainConfig, read_meta, run_pretrain
    from kernelwright.workdir import base_model_dir, resolve_workdir

    if base is not None:
        return base, str(base)
    tiny = base_model_dir(resolve_workdir(None))
    if read_meta(tiny) is not None:
        return tiny, f"the tiny base in {tiny}"
    built = run_pretrain(PretrainConfig(size="micro", out=str(workdir / "micro-base"), workdir=str(workdir),
                                        register=False)).path
    return built, "a micro base pretrained now (kernelwright base-model pretrain --size micro)"


def register_pipeline_model(workdir: Path, max_new_tokens: int, base: Path | None) -> tuple[Registered, str]:
    """The pipeline's kind of model (`pipeline_base`) registered as `register_checkpoint` does; and its origin."""
    t0 = time.perf_counter()
    path, origin = pipeline_base(workdir, base)
    return register_checkpoint(path, workdir, max_new_tokens, t0), origin


def register_checkpoint(folder: Path, workdir: Path, max_new_tokens: int, t0: float) -> Registered:
    """Load `folder` as the stages do, log and register it in `workdir`'s MLflow store, alias @champion."""
    import mlflow
    from mlflow.models import infer_signature

    from kernelwright.models import load_base_model, load_tokenizer
    from kernelwright.tracking import set_alias, setup_tracking

    setup_tracking(workdir)
    model = load_base_model(folder, device="cpu")
    tokenizer = load_tokenizer(folder)
    # params in the signature, so /invocations takes the token budget per request
    signature = infer_signature("prompt", "completion", params={
        "max_new_tokens": max_new_tokens, "do_sample": False, "return_full_text": False})
    with mlflow.start_run(run_name="serve-throughput-bench"):
        info = mlflow.transformers.log_model(  # type: ignore[attr-defined]
            transformers_model={"model": model, "tokenizer": tokenizer}, name="model", task="text-generation",
            registered_model_name=MODEL_NAME, signature=signature,
            pip_requirements=["kernelwright", "torch", "transformers"])
    version = str(info.registered_model_version)
    set_alias(version, ALIAS, MODEL_NAME)
    files = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{MODEL_NAME}/{version}",
                                                     dst_path=str(workdir / "registered")))
    checkpoint = workdir / "registered-checkpoint"
    shutil.copytree(files / "model", checkpoint)
    for item in (files / "components" / "tokenizer").iterdir():
        shutil.copy2(item, checkpoint / item.name)
    return Registered(f"models:/{MODEL_NAME}@{ALIAS}", version, checkpoint, tokenizer,
                      sum(p.numel() for p in model.parameters()), round(time.perf_counter() - t0, 2))


def bin_path(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def transformers_serve_unavailable(env: dict[str, str]) -> str | None:
    """Why `transformers serve --continuous-batching` cannot run here (None: it can); its serving a given model
    is another matter (`probe`)."""
    try:
        done = subprocess.run([bin_path("transformers"), "serve", "--help"], env=env, capture_output=True, text=True,
                              timeout=180)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`transformers serve --help` failed: {type(exc).__name__}: {exc}"
    text = done.stdout + done.stderr
    if done.returncode != 0:
        return f"`transformers serve --help` exited {done.returncode}: {text[-800:]}"
    if "--continuous-batching" not in text:
        return "the installed transformers' `serve` has no --continuous-batching option"
    return None


Make = Callable[[str, list[tuple[str, list[dict[str, str]]]]], list[Body]]  # (result name, prompts) -> requests


@dataclass
class Launch:
    """One server to run: its label, the result names it gives, its command line for a port, the path
    that answers 200 once it is ready, and its request builder; `probe` (given the base URL: why the server
    cannot answer, or None) runs once it is ready, and `fallback` is run instead when that or its start fails."""

    label: str
    names: list[str]
    argv_for: Callable[[int], list[str]]
    ready: str
    make: Make
    probe: Callable[[str], str | None] | None = None
    fallback: Launch | None = None


def probe(make: Make, name: str, timeout_s: float) -> Callable[[str], str | None]:
    """One request of the benchmark's kind (its first prompt): None when answered 200, else what came back."""

    def ask(base: str) -> str | None:
        import httpx

        path, body = make(name, prompts(1))[0]
        try:
            r = httpx.post(f"{base}{path}", json=body, timeout=timeout_s)
        except httpx.HTTPError as exc:
            return f"the probe request failed: {type(exc).__name__}: {exc}"
        return None if r.status_code == 200 else f"the probe request answered {r.status_code}: {r.text[:300]}"

    return ask


def launches(reg: Registered, workdir: Path, tmp: Path, plan: Plan, *, mlflow_workers: int, cb_num_blocks: int,
             cb_max_batch_tokens: int) -> list[Launch]:
    """`kernelwright serve` (check on, then off), `mlflow models serve` and `transformers serve` of `reg`."""

    def kw_make(name: str, items: list[tuple[str, list[dict[str, str]]]]) -> list[Body]:
        return kernel_bodies(items, plan.max_new_tokens, name == KW_ON)

    def mlflow_make(name: str, items: list[tuple[str, list[dict[str, str]]]]) -> list[Body]:
        return mlflow_bodies(items, plan.max_new_tokens, reg.tokenizer)

    def tf_make(name: str, items: list[tuple[str, list[dict[str, str]]]]) -> list[Body]:
        return chat_bodies(items, plan.max_new_tokens, str(reg.checkpoint))

    def tf_argv(port: int) -> list[str]:
        return [bin_path("transformers"), "serve", str(reg.checkpoint), "--device", "cpu", "--host", "127.0.0.1",
                "--port", str(port), "--log-level", "warning"]

    return [
        Launch("kernelwright", [KW_ON, KW_OFF], lambda port: [
            sys.executable, "-m", "kernelwright.cli", "serve", "--model", reg.uri, "--port", str(port),
            "--workdir", str(workdir), "--max_queue", "0", "--no_compile_host",
            "--compile_cache_dir", str(tmp / "compile-cache"), "--log_level", "warning"], "/readyz", kw_make),
        Launch("mlflow", [MLFLOW], lambda port: [
            bin_path("mlflow"), "models", "serve", "-m", reg.uri, "--env-manager", "local", "-h", "127.0.0.1",
            "-p", str(port), "-w", str(mlflow_workers)], "/ping", mlflow_make),
        Launch("transformers_serve", [TF_SERVE], lambda port: [
            *tf_argv(port), "--continuous-batching", "--cb-num-blocks", str(cb_num_blocks),
            "--cb-max-batch-tokens", str(cb_max_batch_tokens)], "/health", tf_make,
            probe=probe(tf_make, TF_SERVE, plan.timeout_s),
            fallback=Launch("transformers_serve_plain", [TF_SERVE], tf_argv, "/health", tf_make)),
    ]
