"""Models and tokenizers: a user's local HF checkpoint, a tiny one built here, or a registry URI.

What the embedded defaults train on a CPU is the pretrained tiny base of `kernelwright.base_model`
(`kernelwright base-model pretrain`: a byte-level BPE tokenizer and an LFM2-shaped model trained
with the next-token loss on the code of the installed packages). `build_tiny_model` makes a
small Qwen2 model of about that size with random weights and a tokenizer trained on the given
texts (the seed corpus in the tests): seconds to build, with p_t about 1/vocab everywhere.
Either way the model is loaded by `load_base_model` through the same `from_pretrained` path.
A registry URI (`models:/kernelwright-coder@candidate`, `models:/kernelwright-coder/3`) is resolved
to its version by `resolve_ref` and loaded with `mlflow.transformers` by `load_model`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from kernelwright.atomic import write_dir
from kernelwright.errors import UsageError
from kernelwright.prompting import CHATML_TEMPLATE

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of the locally built model. ~1.3M parameters at the defaults: trains on 2 CPU cores."""

    vocab_size: int = 4096
    hidden_size: int = 128
    intermediate_size: int = 352
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 4096
    seed: int = 0


def build_tiny_model(out: Path, texts: Iterable[str], spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Train the tokenizer, make a random-weight Qwen2 model, save both to `out` atomically."""
    from kernelwright.base_model.tokenizer import train_tokenizer  # a test and bench helper: moves out

    tokenizer = train_tokenizer(texts, spec.vocab_size)
    config = AutoConfig.for_model(
        "qwen2",
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(spec.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "kernelwright.json").write_text(json.dumps({"built_by": "kernelwright", "spec": spec.__dict__}))

    write_dir(out, fill)
    return out


def load_tokenizer(path: Path) -> PreTrainedTokenizerBase:
    if not (path / "config.json").is_file() and not (path / "tokenizer_config.json").is_file():
        raise UsageError(f"--base-model {path} is not a Hugging Face checkpoint folder (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.chat_template is None:
        tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def placement(device: str | None = None) -> tuple[str, torch.dtype]:
    """Where a loaded model goes and in what dtype: the GPU in bf16 where there is one, else the CPU in fp32."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return device, torch.bfloat16 if device.startswith("cuda") else torch.float32


def load_base_model(path: Path, dtype: torch.dtype | None = None, device: str | None = None) -> PreTrainedModel:
    """Load a causal LM from a local folder (never from a hub): bf16 on a GPU, fp32 on a CPU."""
    if not (path / "config.json").is_file():
        raise UsageError(f"--base-model {path} is not a Hugging Face checkpoint folder (no config.json)")
    device, default_dtype = placement(device)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or default_dtype, local_files_only=True)
    return model.to(device)


@dataclass(frozen=True)
class ModelRef:
    uri: str
    name: str | None = None  # registered model name, when it is a registry URI
    version: str | None = None


def resolve_ref(model: str) -> ModelRef:
    """A registry URI resolved to its version (aliases included); a path as it is."""
    if not model.startswith("models:/"):
        return ModelRef(uri=model)
    rest = model[len("models:/"):]
    name, sep, alias = rest.partition("@")
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    try:
        if sep:
            version = client.get_model_version_by_alias(name, alias).version
        else:
            name, _, version = rest.rpartition("/")
            client.get_model_version(name, version)
    except MlflowException as exc:
        raise UsageError(f"cannot resolve {model} in the MLflow registry: {exc.message}") from None
    return ModelRef(uri=f"models:/{name}/{version}", name=name, version=str(version))


def load_model(ref: ModelRef) -> tuple[Any, Any]:
    """(model, tokenizer) from a local folder or the registry; nothing is fetched from a hub. Either way the
    model goes where `placement` says (MLflow's loader leaves a bare model on the CPU, even on a GPU host)."""
    if ref.version is None:
        path = Path(ref.uri)
        if not (path / "config.json").is_file():
            raise UsageError(f"no model at {path}: train one first or pass --model PATH or models:/NAME@ALIAS")
        return load_base_model(path).eval(), load_tokenizer(path)
    import mlflow.transformers

    parts = mlflow.transformers.load_model(ref.uri, return_type="components")  # type: ignore[attr-defined]
    device, dtype = placement()
    return parts["model"].to(device=device, dtype=dtype).eval(), parts["tokenizer"]
