"""`POST /v1/kernels/generate`: generate candidates, compile-check them, repair, order them.

A candidate whose compile failed, while repair attempts are left, is made once more: `resample`
draws it again from the same prompt (sampled: a greedy request's resample at the server's
`resample_temperature`, each attempt its own seed where the request gave one), `feedback` generates
it from a prompt holding its code and the compiler log (`--repair`, repair_mode). Candidates that
compiled come first; none is marked ok that the compile check did not pass. Several candidates are
sampled: a body that leaves `temperature` out gets `SAMPLED_TEMPERATURE` for n > 1 (0, greedy, for
one), and one that asks for n > 1 at temperature 0, whose candidates could only repeat each other,
answers 400.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from kernelwright.prompting import SYSTEM_PROMPT, extract_code, prompt_messages
from kernelwright.serving import compiling, metrics
from kernelwright.serving.backend import Completion, Sampling, ServingBackend
from kernelwright.serving.bodies import bad_field
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.schemas import (
    Candidate,
    CompileInfo,
    GenerateRequest,
    GenerateResponse,
    ModelInfo,
    Timings,
    Usage,
)

LOG_CHARS = 4000  # of a compiler log put back into a repair prompt
SAMPLED_TEMPERATURE = 0.7  # of a kernel request for n > 1 candidates that leaves temperature out


def temperature_for(n: int, asked: float | None, default: float) -> float:
    """The temperature to sample n candidates at: `asked`, else `default`; n > 1 at 0 is a 400 naming it."""
    if asked is None:
        return default
    if n > 1 and asked == 0:
        raise bad_field("temperature", f"temperature 0 is greedy: the {n} candidates asked for (n) would all be "
                                       "the same; leave temperature out or set it above 0")
    return asked


def check_limit(name: str, value: int, limit: int, unit: str) -> None:
    if value > limit:
        raise bad_field(name, f"at most {limit} {unit} in this server, got {value}")


def validate(req: GenerateRequest, cfg: ServeConfig) -> tuple[str, str]:
    """(which input, its text) after the request's own rules and the server's limits."""
    given = [(k, v) for k, v in (("reference_code", req.reference_code), ("instruction", req.instruction))
             if v is not None and v.strip()]
    if len(given) != 1:
        field_name = "instruction" if req.instruction is not None else "reference_code"
        raise bad_field(field_name, "give exactly one of reference_code and instruction (non-empty)")
    if req.verify:
        raise bad_field("verify", "verify is not available in this server")
    check_limit("n", req.n, cfg.max_n, "candidates")
    check_limit("max_new_tokens", req.max_new_tokens or 0, cfg.max_new_tokens, "tokens")
    check_limit(given[0][0], len(given[0][1]), cfg.max_code_chars, "characters")
    return given[0]


def first_messages(kind: str, text: str) -> list[dict[str, str]]:
    if kind == "reference_code":
        return prompt_messages(text)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text.strip()}]


def repair_mode(asked: str | None, cfg: ServeConfig) -> str:
    """`resample` or `feedback`: the request's, else the server's, `auto` resolved by the backend."""
    mode = asked or cfg.repair
    if mode == "auto":
        return "feedback" if cfg.backend == "openai" else "resample"
    return mode


def resampling(sampling: Sampling, attempt: int, cfg: ServeConfig) -> Sampling:
    """The sampling of repair attempt `attempt` (1, 2, ...) by resampling: another draw, never greedy (which
    would repeat the failed answer), its seed moved on where the request gave one."""
    temperature = sampling.temperature if sampling.temperature > 0 else cfg.resample_temperature
    seed = None if sampling.seed is None else (sampling.seed + attempt) % 2**63
    return replace(sampling, temperature=temperature, seed=seed)


def failure_log(info: CompileInfo) -> str:
    stage = info.device if info.device.status == "failed" else info.host
    return stage.log[-LOG_CHARS:]


def repair_messages(base: list[dict[str, str]], answer: str, info: CompileInfo) -> list[dict[str, str]]:
    note = ("That file does not compile. The compiler said:\n```\n" + failure_log(info) +
            "\n```\nAnswer with the whole corrected Python file.")
    return [*base, {"role": "assistant", "content": answer}, {"role": "user", "content": note}]


@dataclass
class _Work:
    """What one request has produced so far."""

    texts: list[str]
    infos: list[CompileInfo | None]
    sources: list[list[str]]
    repairs: list[int]
    usage: Usage = field(default_factory=Usage)
    generate_s: float = 0.0
    compile_s: float = 0.0


def _failed(info: CompileInfo | None) -> bool:
    return info is not None and metrics.outcome(info) == "failed"


async def _generate(backend: ServingBackend, prompts: list[list[dict[str, str]]], sampling: Sampling,
                    work: _Work) -> list[Completion]:
    t0 = time.perf_counter()
    out = await backend.generate(prompts, sampling)
    work.generate_s += time.perf_counter() - t0
    for c in out:
        work.usage.prompt_tokens += c.prompt_tokens
        work.usage.completion_tokens += c.completion_tokens
        metrics.record_tokens(c.prompt_tokens, c.completion_tokens)
    return out


async def _check(texts: list[str], cfg: ServeConfig, work: _Work) -> list[tuple[CompileInfo, list[str]]]:
    t0 = time.perf_counter()
    checked = await compiling.check([extract_code(t) for t in texts], cfg)
    work.compile_s += time.perf_counter() - t0
    metrics.record_compiles([info for info, _ in checked])
    return checked


async def _repair(backend: ServingBackend, base: list[dict[str, str]], sampling: Sampling, cfg: ServeConfig,
                  work: _Work, mode: str, attempt: int) -> bool:
    """Make every failed candidate once more (`mode`: resample or feedback); False when none had failed."""
    failed = [i for i, info in enumerate(work.infos) if _failed(info)]
    if not failed:
        return False
    if mode == "feedback":
        prompts = [repair_messages(base, work.texts[i], work.infos[i]) for i in failed]  # type: ignore[arg-type]
    else:
        prompts, sampling = [base] * len(failed), resampling(sampling, attempt, cfg)
    fresh = await _generate(backend, prompts, sampling, work)
    checked = await _check([c.text for c in fresh], cfg, work)
    metrics.REPAIRS.inc(len(failed))
    for i, c, (info, sources) in zip(failed, fresh, checked, strict=True):
        work.texts[i], work.infos[i], work.sources[i] = c.text, info, sources
        work.repairs[i] += 1
    return True


def _candidates(work: _Work) -> list[Candidate]:
    cands = [Candidate(code=extract_code(t), cuda_sources=s, compile=i, repairs=r)
             for t, i, s, r in zip(work.texts, work.infos, work.sources, work.repairs, strict=True)]
    return sorted(cands, key=lambda c: not (c.compile is not None and c.compile.ok))  # stable: compiled first


async def generate_kernels(req: GenerateRequest, backend: ServingBackend, cfg: ServeConfig,
                           model: ModelInfo) -> GenerateResponse:
    kind, text = validate(req, cfg)
    base = first_messages(kind, text)
    temperature = temperature_for(req.n, req.temperature, SAMPLED_TEMPERATURE if req.n > 1 else 0.0)
    sampling = Sampling(req.max_new_tokens or cfg.default_max_new_tokens, temperature, 1.0, req.seed)
    work = _Work([], [], [], [0] * req.n)
    work.texts = [c.text for c in await _generate(backend, [base] * req.n, sampling, work)]
    if req.compile_check:
        checked = await _check(work.texts, cfg, work)
        work.infos, work.sources = [i for i, _ in checked], [s for _, s in checked]
        mode = repair_mode(req.repair, cfg)
        for attempt in range(1, req.repair_attempts + 1):
            if not await _repair(backend, base, sampling, cfg, work, mode, attempt):
                break
    else:
        work.infos = [None] * req.n
        work.sources = [compiling.cuda_sources_of(extract_code(t)) for t in work.texts]
    return GenerateResponse(_candidates(work), model, work.usage,
                            Timings(round(work.generate_s, 4), round(work.compile_s, 4)))
