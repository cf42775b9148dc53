"""Config of `kernelwright train`: one field per setting, with its units and off-value."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.tracking import REGISTERED_MODEL
from kernelwright.workdir import TRACKING_URI_HELP

# the loss's readings: plain SFT, token weights only, region (sample) weights only, both (CuSeT)
WEIGHTINGS: tuple[str, ...] = ("plain", "token", "region", "cuset")
SAMPLINGS: tuple[str, ...] = ("random", "group_by_length")  # transformers' train_sampling_strategy values
MODEL_DTYPES = ("bfloat16", "float32")  # besides auto: the device's default


@dataclass
class TrainConfig:
    """Config of `kernelwright train`."""

    data: str | None = field(
        default=None, metadata={"help": "Curated folder (data.parquet). None: <workdir>/curated."}
    )
    base_model: str | None = field(
        default=None, metadata={"help": "Local HF checkpoint to fine-tune. None: the tiny local model."}
    )
    weighting: str = field(
        default="plain",
        metadata={"help": "Loss weighting: plain, token (masking+alpha), region (w_s), cuset (both). plain by "
                          "measurement: cuset made small bases worse (docs/cuset.md)."}
    )
    ablation: str | None = field(
        default=None,
        metadata={"help": "Comma-separated weightings (e.g. plain,cuset) trained one after the other on the same data "
                          "and seed, as child runs train[<weighting>] of one parent run; `candidate` goes to the one "
                          "equal to --weighting, if listed. None: train --weighting only."},
    )
    lora: bool = field(
        default=False, metadata={"help": "Train a LoRA adapter instead of all weights. Excludes --full."}
    )
    full: bool = field(
        default=False, metadata={"help": "Train all weights (also what happens without --lora). Excludes --lora."}
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout on the LoRA path; 0: off."})
    lora_target_modules: str = field(
        default="all-linear", metadata={"help": "Comma-separated module names, or all-linear."}
    )
    merge_lora: bool = field(
        default=False, metadata={"help": "Merge the adapter into the base weights at the end (needs --lora)."}
    )
    max_steps: int = field(default=300, metadata={"help": "Optimizer steps."})
    learning_rate: float = field(default=2e-3, metadata={"help": "Peak LR (warm-up max_steps/20, then cosine)."})
    per_device_train_batch_size: int = field(default=4, metadata={"help": "Samples per device per micro-batch."})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "Micro-batches per optimizer step."})
    max_length: int | None = field(default=4096, metadata={"help": "Truncate sequences to this many tokens."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Clip the gradient norm to this; 0: no clipping."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay; 0: off."})
    model_dtype: str = field(
        default="auto",
        metadata={"help": "Dtype the weights are loaded and trained in: auto (bfloat16 on a GPU, float32 on a CPU), "
                          "bfloat16 or float32 (fp32 master weights, e.g. full fine-tuning under FSDP)."},
    )
    bf16: bool | None = field(
        default=None,
        metadata={"help": "bfloat16 autocast. None: on with a bf16-capable GPU, off on a CPU (float32 there, so "
                          "runs compare exactly: TRL's own default, on, autocasts on a CPU too)."},
    )
    gradient_checkpointing: bool | None = field(
        default=None,
        metadata={"help": "Recompute activations in the backward (less memory, ~25%% more compute). "
                          "None: on with a GPU, off on a CPU."},
    )
    sampling: str = field(
        default="random",
        metadata={"help": "Order of the training samples: random, or group_by_length (batches of samples of "
                          "similar length: less padding, so fewer tokens computed per step; still drawn by --seed)."},
    )
    seed: int = field(default=0, metadata={"help": "Seed of data order, init of LoRA and dropout."})
    logging_steps: int = field(default=10, metadata={"help": "Log metrics every N steps."})
    save_steps: int = field(default=100, metadata={"help": "Checkpoint every N steps (for resume)."})
    output_dir: str | None = field(
        default=None, metadata={"help": "Checkpoints and final model. None: <workdir>/train."}
    )
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
    register: bool = field(default=True, metadata={"help": "Register the model in the MLflow registry."})
    registered_model: str = field(default=REGISTERED_MODEL, metadata={"help": "Registered model name."})
    alias: str | None = field(default="candidate", metadata={"help": "Alias given to the new version; empty: none."})
    system_metrics: bool = field(
        default=True, metadata={"help": "Log CPU, memory, disk (and GPU with nvidia-ml-py) use to MLflow every 10 s."}
    )

    def __post_init__(self) -> None:
        for mode in (self.weighting, *self.ablation_modes):
            if mode not in WEIGHTINGS:
                raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, not {mode!r}")
        if self.ablation is not None and (not self.ablation_modes
                                          or len(set(self.ablation_modes)) != len(self.ablation_modes)):
            raise ValueError(f"ablation must list distinct weightings, e.g. plain,cuset, not {self.ablation!r}")
        if self.max_steps <= 0:
            raise ValueError("max_steps must be positive")
        if not 0.0 < self.learning_rate < float("inf"):  # NaN too
            raise ValueError(f"learning_rate must be a positive number, not {self.learning_rate}")
        if self.per_device_train_batch_size < 1 or self.gradient_accumulation_steps < 1:
            raise ValueError("per_device_train_batch_size and gradient_accumulation_steps must be at least 1")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError("max_length must be at least 1 (or none)")
        if self.lora and self.full:
            raise ValueError("--lora and --full exclude each other (a config file's `lora: true` is undone with "
                             "--lora false)")
        if self.merge_lora and not self.lora:
            raise ValueError("--merge-lora needs --lora")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}, not {self.sampling!r}")
        if self.model_dtype not in ("auto", *MODEL_DTYPES):
            raise ValueError(f"model_dtype must be auto, {', '.join(MODEL_DTYPES)}, not {self.model_dtype!r}")

    @property
    def ablation_modes(self) -> list[str]:
        return [m.strip() for m in (self.ablation or "").split(",") if m.strip()]
