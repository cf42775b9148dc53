"""The serving stage: the HTTP API of `kernelwright serve` (Litestar), built by `app.create_app`.

- `config`: `ServeConfig`, every knob with its unit and off-value;
- `schemas`: request and response bodies (msgspec);
- `routes`, `limits`: thin controllers; keys, readiness, the in-flight bound, request ids, errors;
- `kernels`: generate, compile-check, repair and order kernel candidates;
- `openai_api`: OpenAI-compatible chat completions and completions (JSON and SSE);
- `backend`: the generation protocol and the scripted test/demo backend; `batching`: transformers'
  continuous batching (the default); `hf`: transformers generate, one request at a time;
- `loading`: which model (alias fallback) and loading it; `compiling`: the compile check adapter;
- `metrics`: kernelwright's Prometheus series.
"""
