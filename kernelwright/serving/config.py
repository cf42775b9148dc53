"""`ServeConfig`: every knob of `kernelwright serve`, with its unit and its off-value."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from kernelwright.cuda.compile_result import HOST_FRONTENDS
from kernelwright.loop_limits import LOOP_TEST
from kernelwright.workdir import TRACKING_URI_HELP, redacted

DEFAULT_MODEL = "models:/kernelwright-coder@champion"
KEYS_ENV = "KERNELWRIGHT_API_KEYS"
BATCHING = ("auto", "continuous", "sequential")
REPAIRS = ("auto", "resample", "feedback")
KV_CACHES = ("auto", "static", "dynamic")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class ServeConfig:
    """Config of `kernelwright serve`."""

    model: str = field(default=DEFAULT_MODEL, metadata={
        "help": "Registry URI (models:/NAME@ALIAS, models:/NAME/VERSION) or a local HF checkpoint folder. "
                "models:/NAME@champion falls back to @candidate when no champion is set."})
    host: str = field(default="127.0.0.1", metadata={
        "help": "Interface to listen on. Loopback by default; 0.0.0.0 exposes the server (set api_keys)."})
    port: int = field(default=8000, metadata={"help": "TCP port."})
    backend: str = field(default="hf", metadata={
        "help": "Generation backend: hf (transformers on the loaded model; see batching), openai (a remote "
                "OpenAI-compatible engine at backend_url: vLLM, SGLang, TGI, transformers serve; --model is unused) "
                "or scripted:FILE.json (a test/demo backend answering the JSON list of texts in order, no model "
                "loaded)."})
    backend_url: str | None = field(default=None, metadata={
        "help": "Base URL of the engine the openai backend generates with, http(s)://HOST:PORT (a trailing /v1 is "
                "optional). Needed with --backend openai; None otherwise."})
    backend_model: str | None = field(default=None, metadata={
        "help": "Model id the openai backend asks the engine for (one its /v1/models lists); responses name it. "
                "None: the one model the engine lists (several listed: name one)."})
    backend_api_key_env: str | None = field(default=None, metadata={
        "help": "Name of the environment variable holding the bearer key the engine wants (the key itself is "
                "never a flag and never logged). None: no key is sent."})
    backend_timeout_s: float = field(default=300.0, metadata={
        "help": "Seconds the engine may take to answer one candidate, or stay silent between two streamed chunks; "
                "longer answers 504. 0: no limit."})
    backend_connect_timeout_s: float = field(default=10.0, metadata={
        "help": "Seconds to open a connection to the engine; an engine not reached in time answers 503. 0: no "
                "limit."})
    backend_startup_s: float = field(default=120.0, metadata={
        "help": "At start-up, seconds to keep asking the engine's /v1/models (about every second) before /readyz "
                "reports failed; the server is ready once the engine answered. 0: ask once."})
    backend_health_s: float = field(default=5.0, metadata={
        "help": "Seconds /readyz trusts the openai backend's engine's last answer to its /v1/models before asking "
                "again (an engine that stopped answering makes /readyz 503, and 200 again once it answers). 0: ask "
                "at every /readyz."})
    batching: str = field(default="auto", metadata={
        "help": "How the hf backend shares the model between requests. auto: continuous where the model allows "
                "it, else sequential (a model with layers transformers' paged cache cannot hold, such as LFM2's "
                "short convolutions; a warning at start-up says so). continuous: transformers' continuous batching "
                "(the tokens of every request in flight share each forward pass; per-request temperature and "
                "top_p; a seed with temperature > 0 answers 400, as it cannot be honoured there); a model it "
                "cannot hold is served sequential, with the same warning. sequential: transformers generate on one "
                "worker thread, the waiting requests of the same sampling batched into one call (see "
                "max_batch_sequences); honours seed."})
    max_batch_sequences: int = field(default=16, metadata={
        "help": "With sequential batching, most sequences (candidates, of all requests together) one generate "
                "call takes: requests waiting while the model is busy join the next call when they are greedy, or "
                "sample with the same temperature and top_p and no seed (a seeded one runs alone); each stops at "
                "its own max_new_tokens. A request's own candidates always run together. Padding to the longest "
                "prompt makes a call's attention grow with rows x length squared: on a CPU, 16 rows of ~600-token "
                "kernel prompts made the most requests a second, 32 fewer. 0: one request at a time."})
    kv_cache: str = field(default="auto", metadata={
        "help": "With sequential batching, the KV cache of a generate call. static: a fixed-size cache whose "
                "decoding step transformers compiles on an accelerator (the first call of each shape ~30 s); a "
                "call's rows are padded to max_batch_sequences and its cache to a multiple of 1024 tokens, so "
                "few shapes are ever compiled. dynamic: a cache that grows with the call, nothing compiled. auto: "
                "static where the model sits on a CUDA device, else dynamic (on a CPU nothing is compiled, so "
                "static only adds padding)."})
    warm_up: bool = field(default=True, metadata={
        "help": "With the static KV cache: at load (and at each reload), one call of the shape a request with "
                "default_max_new_tokens gets, two tokens a row, so that the decoding step is compiled before "
                "/readyz answers 200, not in the first request. false: the first call of each shape compiles."})
    stop_loops: bool = field(default=True, metadata={
        "help": f"With sequential batching, end a candidate caught in a repetition loop ({LOOP_TEST}, "
                "as evaluation's --stop-loops) there, with finish_reason length, "
                "instead of at max_new_tokens: a small model's loop otherwise holds its whole generate call to the "
                "largest budget. false: every candidate runs to its end-of-sequence token or budget."})
    cb_num_blocks: int = field(default=256, metadata={
        "help": "KV-cache blocks of the continuous-batching engine, each cb_page_size tokens of every layer: "
                "blocks x page size tokens for all requests in flight, and the most one completion (prompt + "
                "max_new_tokens) may take (more answers 400). 0: transformers sizes the cache from free "
                "accelerator memory (on a CPU that takes seconds to start)."})
    cb_page_size: int = field(default=64, metadata={
        "help": "Tokens per KV-cache block of the continuous-batching engine, 4 or more. Sequences whose prompts "
                "start alike (the system prompt, a request's n candidates) share the cache of whole blocks, so "
                "smaller pages share more of a common prefix."})
    cb_max_batch_tokens: int = field(default=256, metadata={
        "help": "Most tokens one forward pass of the continuous-batching engine takes (prompt chunks plus one "
                "per decoding sequence); longer prompts are prefilled in chunks. 0: transformers sizes it from "
                "free accelerator memory."})
    cb_prefix_sharing: bool = field(default=True, metadata={
        "help": "Sequences whose prompts start alike share the cache blocks of that prefix (computed once, kept "
                "while there is room). False (--no_cb_prefix_sharing): every sequence prefills its whole prompt."})
    cb_max_requests_per_batch: int = field(default=0, metadata={
        "help": "Most sequences (candidates) in one forward pass of the continuous-batching engine; the others "
                "wait for the next pass. 0: 8 on a CPU (there a pass attends densely over all its sequences, so "
                "its cost grows with their square), transformers' default on an accelerator."})
    api_keys: list[str] = field(default_factory=list, metadata={
        "help": f"Bearer keys that /v1 routes accept; also read from ${KEYS_ENV} (comma-separated). "
                "Empty (and no env): no authentication."})
    max_body_bytes: int = field(default=1_000_000, metadata={
        "help": "Largest request body, in bytes; larger bodies answer 413."})
    body_timeout_s: float = field(default=10.0, metadata={
        "help": "Seconds a client has to send its whole request body once its headers are in; later answers 408 "
                "and closes the connection (a client that hangs up first is counted as status 499 in the "
                "metrics). 0: no limit."})
    max_queue: int = field(default=8, metadata={
        "help": "Requests in flight on /v1 routes (generating or waiting); one more answers 503 with "
                "Retry-After. 0: no limit."})
    retry_after_s: int = field(default=2, metadata={"help": "Retry-After value sent with a 503, in seconds."})
    max_n: int = field(default=8, metadata={"help": "Most candidates (choices) one request may ask for (1-8)."})
    max_new_tokens: int = field(default=4096, metadata={
        "help": "Most new tokens one completion may ask for (1-4096)."})
    default_max_new_tokens: int = field(default=2048, metadata={
        "help": "New tokens per completion when a request does not say: 2048 holds 97%% of the synthesized and 99%% "
                "of the seed solutions in the `small` base's tokens (1024 cut 60%% of them)."})
    repair: str = field(default="auto", metadata={
        "help": "How a kernel candidate whose compile failed is made again (a request's repair_attempts times): "
                "resample, from the same prompt, sampled (at the request's temperature, or resample_temperature "
                "where it asked for greedy); feedback, from a prompt holding its code and the compiler's log; auto, "
                "feedback with --backend openai (a model behind another engine may read a log) and resample with "
                "kernelwright's own models, which never trained on one (served on an H100, none of 10 failed "
                "answers of a champion compiled after a feedback repair). A request's `repair` overrides it."})
    resample_temperature: float = field(default=0.2, metadata={
        "help": "Temperature of a resampled candidate where the request asked for greedy (0), which would only "
                "repeat the failed answer: 0.2, the temperature kernelwright's evaluations measure compile rates "
                "at (0 < t <= 2)."})
    max_code_chars: int = field(default=100_000, metadata={
        "help": "Longest reference_code, instruction, prompt or message text, in characters."})
    compile_workers: int = field(default=2, metadata={"help": "Compiles run at once for one request (1 or more)."})
    compile_host: bool = field(default=True, metadata={
        "help": "Also run the host stage of the compile check (a syntax check against torch headers; the "
                "first check builds a precompiled header, 10-60 s). False: device stage (NVRTC) only, "
                "host status 'skipped'."})
    compile_host_frontend: str = field(default="auto", metadata={
        "help": "Host stage checker: libclang (~1 s a check), gcc (g++, ~8 s), or auto (libclang when "
                "installed, else gcc)."})
    compile_timeout_s: float = field(default=60.0, metadata={
        "help": "Wall-clock (and CPU-time) limit per compile, in seconds. 0: no limit."})
    compile_cache_dir: str | None = field(default=None, metadata={
        "help": "Folder of the compile check's result cache and precompiled header. None: its default "
                "(~/.cache/kernelwright/compile_check)."})
    workdir: str | None = field(default=None, metadata={
        "help": "Work folder whose MLflow store resolves models:/ URIs (--tracking-uri or MLFLOW_TRACKING_URI win). "
                "None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
    reload_interval_s: float = field(default=60.0, metadata={
        "help": "Seconds between polls of the registry alias (models:/NAME@ALIAS with the hf backend); when it "
                "names another version, that one loads in the background (both are in memory meanwhile) and "
                "replaces the served one, requests in flight finishing on the old. 0: never poll."})
    drain_timeout_s: float = field(default=30.0, metadata={
        "help": "At shutdown (SIGTERM, Ctrl-C), seconds the server keeps its port open for the requests in flight "
                "to finish, new ones answering 503 and /readyz 'draining' meanwhile; those still running then "
                "answer 503, and uvicorn stops. 0: do not wait."})
    rate_limit_per_minute: int = field(default=0, metadata={
        "help": "Requests a minute each API key may send to /v1 routes (the client address is counted when no "
                "keys are configured); one more answers 429 with Retry-After. 0: no limit."})
    redis_url: str | None = field(default=None, metadata={
        "help": "Redis URL (redis://HOST:6379/0) of the store that keeps the rate-limit counts, shared by every "
                "worker and server naming it. None: each process counts in its own memory."})
    log_requests: bool = field(default=False, metadata={
        "help": "Log served kernel and non-streamed completion requests to MLflow (experiment kernelwright-served: "
                "prompt, code, CUDA sources, compile results; never headers or keys) for retraining. "
                "False: nothing is logged."})
    log_requests_batch: int = field(default=32, metadata={
        "help": "Candidate rows kept before they are appended to the MLflow table (and at shutdown), 1 or more."})
    log_level: str = field(default="info", metadata={"help": "uvicorn log level: debug, info, warning, error."})

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be a TCP port, 0 to 65535 (0: any free one), not {self.port}")
        if not 1 <= self.max_n <= 8:
            raise ValueError("max_n must be between 1 and 8")
        if not 1 <= self.max_new_tokens <= 4096:
            raise ValueError("max_new_tokens must be between 1 and 4096")
        if not 1 <= self.default_max_new_tokens <= self.max_new_tokens:
            raise ValueError("default_max_new_tokens must be between 1 and max_new_tokens")
        if self.max_body_bytes < 1 or self.max_code_chars < 1:
            raise ValueError("max_body_bytes and max_code_chars must be positive")
        if self.log_requests_batch < 1:
            raise ValueError("log_requests_batch must be 1 or more")
        if self.drain_timeout_s < 0:
            raise ValueError("drain_timeout_s must be 0 (do not wait) or more")
        if self.body_timeout_s < 0:
            raise ValueError("body_timeout_s must be 0 (no limit) or more")
        if self.reload_interval_s < 0:
            raise ValueError("reload_interval_s must be 0 (never poll) or more")
        if self.rate_limit_per_minute < 0:
            raise ValueError("rate_limit_per_minute must be 0 (no limit) or more")
        if self.max_queue < 0 or self.compile_workers < 1:
            raise ValueError("max_queue must be 0 (no limit) or more, compile_workers 1 or more")
        if self.compile_host_frontend not in HOST_FRONTENDS:
            raise ValueError(f"compile_host_frontend must be auto, libclang or gcc, not {self.compile_host_frontend!r}")
        if self.repair not in REPAIRS:
            raise ValueError(f"repair must be auto, resample or feedback, not {self.repair!r}")
        if not 0.0 < self.resample_temperature <= 2.0:
            raise ValueError(f"resample_temperature must be above 0 and at most 2, not {self.resample_temperature}")
        if self.kv_cache not in KV_CACHES:
            raise ValueError(f"kv_cache must be auto, static or dynamic, not {self.kv_cache!r}")
        if self.batching not in BATCHING:
            raise ValueError(f"batching must be auto, continuous or sequential, not {self.batching!r}")
        if min(self.cb_num_blocks, self.cb_max_batch_tokens, self.cb_max_requests_per_batch) < 0:
            raise ValueError("cb_num_blocks, cb_max_batch_tokens and cb_max_requests_per_batch must be 0 "
                             "(transformers' sizing) or more")
        if self.max_batch_sequences < 0:
            raise ValueError("max_batch_sequences must be 0 (one request at a time) or more")
        if self.cb_page_size < 4:
            raise ValueError("cb_page_size must be 4 or more")
        if self.backend not in ("hf", "openai") and not self.backend.startswith("scripted:"):
            raise ValueError(f"backend must be hf, openai or scripted:FILE.json, not {self.backend!r}")
        self._check_engine()

    def _check_engine(self) -> None:
        """The openai backend's fields (the key's variable is read when the server starts)."""
        if self.backend == "openai" and not self.backend_url:
            raise ValueError("--backend openai needs --backend_url http://HOST:PORT (the engine's address)")
        if self.backend_url is not None:
            parts = urlsplit(self.backend_url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
                raise ValueError("backend_url must be http://HOST:PORT or https://HOST[:PORT][/PATH], "
                                 f"not {redacted(self.backend_url)!r}")
        if self.backend_api_key_env is not None and not _ENV_NAME.match(self.backend_api_key_env):
            raise ValueError("backend_api_key_env must be the name of an environment variable (letters, digits, "
                             "underscores), not the key itself")
        if min(self.backend_timeout_s, self.backend_connect_timeout_s, self.backend_startup_s,
               self.backend_health_s) < 0:
            raise ValueError("backend_timeout_s, backend_connect_timeout_s, backend_startup_s and backend_health_s "
                             "must be 0 or more")
        if self.backend_model is not None and not self.backend_model.strip():
            raise ValueError("backend_model must name a model, or be left out")

    def keys(self) -> frozenset[str]:
        """The accepted API keys: the configured ones and those in the environment."""
        env = [k.strip() for k in os.environ.get(KEYS_ENV, "").split(",")]
        return frozenset(k for k in [*self.api_keys, *env] if k)
