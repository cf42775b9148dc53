"""Ask a teacher for candidates: k answers per problem from an OpenAI-compatible engine.

The engine is kernelwright's own `kernelwright serve`, vLLM or SGLang: `POST /v1/chat/completions`
with the chat format of `kernelwright.prompting` and `n=k` (k separate requests where the engine
refuses n > 1 with a 400), problems over a thread pool of `concurrency` requests. The teacher's
identity is recorded with its answers: its base URL, model id and served version, which
kernelwright's server names in the `x-kernelwright-model-version` header of every /v1 answer
(other engines give none: "unknown"). A 429 or 503 is retried after its Retry-After; any other
engine failure of one problem (connection lost, a 5xx, malformed JSON) is recorded on that
problem and the run goes on. A teacher that cannot be reached at all is a UsageError.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from kernelwright import jsontext
from kernelwright.errors import UsageError
from kernelwright.prompting import prompt_messages
from kernelwright.verifier.problems import Problem

log = logging.getLogger(__name__)

API_KEY_ENV = "KERNELWRIGHT_TEACHER_API_KEY"
# the header kernelwright's server puts on every /v1 answer (kernelwright/serving/limits.py: MODEL_VERSION)
MODEL_VERSION_HEADER = "x-kernelwright-model-version"
UNKNOWN_VERSION = "unknown"
RETRY_STATUSES = frozenset({429, 503})  # busy: asked again after Retry-After
MAX_RETRY_WAIT_S = 30.0
DETAIL_CHARS = 300


def _api_key_from_env() -> str | None:
    return os.environ.get(API_KEY_ENV) or None


@dataclass(frozen=True)
class TeacherSettings:
    """Where the teacher is and how it samples. `url`: the engine's base URL (a trailing /v1 is accepted);
    `model`: "" asks GET /v1/models and takes the first; `api_key`: a bearer key (default:
    $KERNELWRIGHT_TEACHER_API_KEY)."""

    url: str
    model: str = ""
    k: int = 4  # candidates per problem
    temperature: float = 0.7
    max_tokens: int = 4096  # new tokens per candidate
    concurrency: int = 8  # HTTP requests in flight
    timeout_s: float = 600.0  # per HTTP request
    retries: int = 3  # times one request is asked again after a 429 or 503
    api_key: str | None = field(default_factory=_api_key_from_env, repr=False)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise UsageError(f"teacher url must start with http:// or https://, not {self.url!r}")
        if self.k < 1 or self.concurrency < 1 or self.max_tokens < 1:
            raise UsageError("teacher k, concurrency and max_tokens must each be 1 or more")
        if self.temperature < 0:
            raise UsageError(f"teacher temperature must be 0 or more, not {self.temperature}")
        if self.temperature == 0 and self.k > 1:
            raise UsageError(f"teacher temperature 0 is greedy: the k={self.k} candidates would repeat each other; "
                             "set it above 0")
        if self.timeout_s <= 0 or self.retries < 0:
            raise UsageError("teacher timeout_s must be above 0 and retries 0 or more")

    @property
    def base_url(self) -> str:
        """The URL without a trailing slash or /v1: the routes are added to it."""
        base = self.url.rstrip("/")
        return base.removesuffix("/v1") if base.endswith("/v1") else base


@dataclass(frozen=True)
class TeacherIdentity:
    """Who wrote a pair: the engine's base URL, the model id, and its version ("unknown" where not given)."""

    url: str
    model: str
    version: str = UNKNOWN_VERSION

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "model": self.model, "version": self.version}


@dataclass(frozen=True)
class ProblemAnswers:
    """The teacher's answers to one problem: up to k texts, the engine's error (None: none), and the
    served version the answers' headers named (None: none named)."""

    problem_id: str
    texts: tuple[str, ...]
    error: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class TeacherAnswers:
    """Every problem's answers, in problem order, and the teacher that wrote them."""

    teacher: TeacherIdentity
    k: int
    answers: tuple[ProblemAnswers, ...]

    def of(self, problem_id: str) -> ProblemAnswers | None:
        return next((a for a in self.answers if a.problem_id == problem_id), None)

    @property
    def errors(self) -> dict[str, str]:
        """Problem id -> the engine's error, for the problems that had one."""
        return {a.problem_id: a.error for a in self.answers if a.error is not None}


class EngineFailure(Exception):
    """One request to the engine failed: no answer, an HTTP error status or a body that is not the API's."""

    def __init__(self, message: str, status: int | None = None, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s  # what a 429 or 503 asked to wait


class _Client:
    """The HTTP side: JSON requests with the bearer key, retried while the engine says it is busy."""

    def __init__(self, settings: TeacherSettings) -> None:
        self.settings = settings
        self.base = settings.base_url
        self.n_refused = threading.Event()  # the engine answered 400 to n > 1, and 200 to n = 1

    def call(self, method: str, route: str, body: Mapping[str, Any] | None = None) -> tuple[Any, Mapping[str, str]]:
        """(decoded JSON, headers with lower-case names); EngineFailure otherwise."""
        for attempt in range(self.settings.retries + 1):
            try:
                return self._once(method, route, body)
            except EngineFailure as exc:
                if exc.status not in RETRY_STATUSES or attempt == self.settings.retries:
                    raise
                log.info("teacher busy (%s); asking again in %.0f s", exc, exc.retry_after_s)
                time.sleep(exc.retry_after_s)
        raise AssertionError("unreachable")

    def _once(self, method: str, route: str, body: Mapping[str, Any] | None) -> tuple[Any, Mapping[str, str]]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + route, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as response:
                raw = response.read()
                answer_headers = {k.lower(): v for k, v in response.headers.items()}
        except urllib.error.HTTPError as exc:
            raise EngineFailure(f"HTTP {exc.code} from {method} {route}: {_detail(exc)}", exc.code,
                                _retry_after_s(exc.headers.get("Retry-After"))) from None
        except (urllib.error.URLError, OSError) as exc:  # refused, reset, timed out, DNS
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise EngineFailure(f"no answer to {method} {route}: {reason}") from None
        try:
            return jsontext.loads(raw), answer_headers
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # nested too deeply included (jsontext)
            raise EngineFailure(f"malformed JSON from {method} {route}: {type(exc).__name__}: {exc}: "
                                f"{raw[:DETAIL_CHARS]!r}") from None


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read().decode("utf-8", errors="replace")[:DETAIL_CHARS].strip()
    except OSError:
        return str(exc.reason)


def _retry_after_s(value: str | None) -> float:
    try:
        return min(max(float(value or 1.0), 0.0), MAX_RETRY_WAIT_S)
    except ValueError:  # an HTTP date: wait the default
        return 1.0


def teacher_identity(client: _Client) -> TeacherIdentity:
    """GET /v1/models: the model to ask (the first listed when none was set) and the served version.
    Unreachable, or no model to ask: a UsageError naming the URL."""
    settings = client.settings
    try:
        listing, headers = client.call("GET", "/v1/models")
    except EngineFailure as exc:
        if exc.status is None or not settings.model:
            raise UsageError(f"the teacher at {client.base} cannot be asked: {exc}") from None
        log.warning("teacher at %s: %s; asking for model %r anyway", client.base, exc, settings.model)
        return TeacherIdentity(client.base, settings.model)
    model = settings.model or _first_model(listing)
    if not model:
        raise UsageError(f"the teacher at {client.base} lists no model in GET /v1/models; set the teacher model")
    return TeacherIdentity(client.base, model, headers.get(MODEL_VERSION_HEADER) or UNKNOWN_VERSION)


def _first_model(listing: Any) -> str:
    data = listing.get("data") if isinstance(listing, dict) else None
    first = data[0] if isinstance(data, list) and data else None
    return str(first["id"]) if isinstance(first, dict) and first.get("id") else ""


def _texts(payload: Any) -> list[str]:
    """The assistant texts of a chat completion, in choice order; EngineFailure when it is not one."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not isinstance(choices, list) or not choices:
        raise EngineFailure(f"malformed answer: no choices in {str(payload)[:DETAIL_CHARS]}")
    texts: list[tuple[int, str]] = []
    for position, choice in enumerate(choices):
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str | None):
            raise EngineFailure(f"malformed answer: choice {position} has no message text")
        index = choice.get("index", position) if isinstance(choice, dict) else position
        texts.append((index if isinstance(index, int) else position, content or ""))
    return [text for _, text in sorted(texts, key=lambda t: t[0])]


def _ask_one(client: _Client, problem: Problem, teacher: TeacherIdentity) -> ProblemAnswers:
    """k answers for one problem: one request with n=k, or k requests where n > 1 is refused."""
    settings = client.settings
    try:
        reference = problem.path.read_text(encoding="utf-8")
    except OSError as exc:
        return ProblemAnswers(problem.id, (), f"cannot read the problem file: {exc}")
    body = {"model": teacher.model, "messages": prompt_messages(reference), "temperature": settings.temperature,
            "max_tokens": settings.max_tokens}
    texts: list[str] = []
    versions: list[str] = []

    def ask(n: int) -> None:
        payload, headers = client.call("POST", "/v1/chat/completions", {**body, "n": n})
        texts.extend(_texts(payload)[:n])
        if headers.get(MODEL_VERSION_HEADER):
            versions.append(headers[MODEL_VERSION_HEADER])

    error: str | None = None
    try:
        if settings.k == 1 or client.n_refused.is_set():
            ask(1)
        else:
            try:
                ask(settings.k)
            except EngineFailure as exc:
                if exc.status != 400:
                    raise
                log.info("teacher refused n=%d (%s): asking %d times", settings.k, exc, settings.k)
                ask(1)
                client.n_refused.set()
        while len(texts) < settings.k and (settings.k == 1 or client.n_refused.is_set()):
            ask(1)
    except EngineFailure as exc:
        error = str(exc)
        log.warning("teacher failed on %s: %s", problem.id, exc)
    return ProblemAnswers(problem.id, tuple(texts), error, versions[-1] if versions else None)


def ask_teacher(problems: Sequence[Problem], settings: TeacherSettings,
                on_progress: Callable[[ProblemAnswers], None] | None = None) -> TeacherAnswers:
    """k candidates per problem from the teacher, in problem order. `on_progress(answers)` is called
    as each problem's answers land. A teacher that cannot be reached: UsageError naming its URL."""
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise UsageError(f"problem ids repeat: {sorted({i for i in ids if ids.count(i) > 1})[:5]}")
    client = _Client(settings)
    teacher = teacher_identity(client)
    log.info("teacher %s (model %s, version %s): %d problems x %d candidates", teacher.url, teacher.model,
             teacher.version, len(problems), settings.k)
    done: dict[str, ProblemAnswers] = {}
    with ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="teacher") as pool:
        futures = [pool.submit(_ask_one, client, p, teacher) for p in problems]
        for future in as_completed(futures):
            answers = future.result()
            done[answers.problem_id] = answers
            if on_progress is not None:
                on_progress(answers)
    return TeacherAnswers(teacher, settings.k, tuple(done[p.id] for p in problems))
