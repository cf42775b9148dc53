"""Config of `kernelwright base-model pretrain` and the sizes it builds: one field per setting, with units."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kernelwright.base_model.corpus import SOURCE_NAMES, Selection
from kernelwright.workdir import TRACKING_URI_HELP

REGISTERED_BASE = "kernelwright-base"  # the registry name of every base this command builds


@dataclass(frozen=True)
class Preset:
    """A size: the model's shape and what it trains on, for how long."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layers: str  # one letter a layer, bottom up: c a gated short convolution, a attention
    num_attention_heads: int
    num_key_value_heads: int
    seq_len: int
    short_seq_len: int  # curriculum: sequences of this length first (0: none)
    short_share: float  # share of the schedule on short sequences
    batch_size: int  # sequences of short_seq_len (or seq_len) per step; the long phase keeps the tokens
    learning_rate: float
    minutes: float
    corpus_chars: int  # 0: every document of the sources
    tokenizer_chars: int
    copy_share: float = 0.0  # share of sequences that are copying exercises (BlockSampler)
    copy_steps: int = 0  # first steps on copying exercises only (LoopPlan)
    conv_kernel: int = 3  # tokens each short convolution sees (LFM2's conv_L_cache)


SIZES = {
    "micro": Preset(512, 32, 64, "ca", 2, 1, 128, 0, 0.0, 4, 1e-2, 0.5, 300_000, 100_000),
    "tiny": Preset(416, 128, 352, "ca", 4, 2, 2048, 256, 0.7, 8, 3e-3, 3.0, 5_000_000, 2_000_000,
                   copy_share=0.1, copy_steps=800),
    "small": Preset(16384, 768, 2048, "ccaccaccacca", 12, 4, 2048, 0, 0.0, 16, 6e-4, 25.0, 0, 20_000_000),
}
MIN_VOCAB = 288  # the byte alphabet (256), the special tokens and a few merges
LAYER_TYPES = {"c": "conv", "a": "full_attention"}


@dataclass
class PretrainConfig:
    """Config of `kernelwright base-model pretrain`."""

    size: str = field(default="tiny", metadata={"help": "micro (seconds, for tests), tiny (~0.4M params, a CPU) "
                                                        "or small (~90M params, a GPU)."})
    minutes: float = field(default=0.0, metadata={"help": "Wall-clock budget of the whole build, in minutes; "
                                                          "training stops in time. 0: the size's (tiny 3)."})
    max_steps: int = field(default=0, metadata={"help": "Optimizer steps at most; 0: what the budget allows."})
    out: str | None = field(default=None, metadata={"help": "Checkpoint folder. None: <workdir>/base-model."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
    source: list[str] = field(default_factory=list, metadata={
        "help": "Folders of code to pretrain on instead of the installed packages'; repeatable.", "action": "extend"})
    require_sources: list[str] = field(default_factory=list, metadata={
        "help": "Installed sources the corpus must hold (names: " + ", ".join(SOURCE_NAMES) + "); one not "
                "installed is an error naming its package. Empty: whatever is installed. Repeatable.",
        "action": "extend"})
    decontaminate_against: list[str] = field(default_factory=list, metadata={
        "help": "More evaluation folders to exclude (the seed corpus and the suite always are); repeatable.",
        "action": "extend"})
    corpus_chars: int = field(default=-1, metadata={"help": "Characters of pretraining text; 0: all; -1: the "
                                                            "size's (tiny 5M, before decontamination)."})
    vocab_size: int = field(default=0, metadata={
        "help": "Tokenizer vocabulary, in tokens (special tokens included); 0: the size's (tiny 416). A larger one "
                "makes kernels fewer tokens long (synthesized elementwise solutions: median 1,618 at 416, 1,034 at "
                "2,048) at the cost of embedding parameters."})
    seq_len: int = field(default=0, metadata={"help": "Tokens per full-length sequence; 0: the size's (tiny 2048)."})
    batch_size: int = field(default=0, metadata={"help": "Short sequences per step (full-length ones: as many as "
                                                         "hold the same tokens); 0: the size's (tiny 8)."})
    learning_rate: float = field(default=0.0, metadata={"help": "Peak learning rate; 0: the size's (tiny 3e-3)."})
    warmup_steps: int = field(default=10, metadata={"help": "Linear warm-up steps before the cosine decay."})
    decontam_ngram: int = field(default=13, metadata={"help": "Decontamination n-gram length, in code tokens."})
    decontam_min_share: float = field(default=0.0, metadata={
        "help": "A document is left out when it holds more than this share of a problem's n-grams (0: any one)."})
    checkpoint_s: float = field(default=60.0, metadata={"help": "Seconds between resumable checkpoints."})
    threads: int = field(default=0, metadata={
        "help": "CPU threads while pretraining on a CPU; 0: one for micro, for tiny the cores the load average shows "
                "idle (spinning threads lose much when other work shares the cores), all for small."})
    bf16: bool | None = field(default=None, metadata={
        "help": "bfloat16 autocast while training (float32 weights). None: on a GPU, and on a CPU with bf16 "
                "instructions (AVX512-BF16, AMX); false: float32 throughout."})
    seed: int = field(default=0, metadata={"help": "Seed of the weights and of the document order."})
    register: bool = field(default=True, metadata={"help": f"Register the result as {REGISTERED_BASE} in MLflow."})
    force: bool = field(default=False, metadata={"help": "Build again even when a matching base exists."})

    def __post_init__(self) -> None:
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {', '.join(SIZES)}, not {self.size!r}")
        values = (self.minutes, self.max_steps, self.seq_len, self.batch_size, self.learning_rate, self.threads,
                  self.vocab_size)
        if not all(v >= 0 and v != float("inf") for v in values):  # NaN fails `>= 0`
            raise ValueError("minutes, max_steps, vocab_size, seq_len, batch_size, learning_rate and threads must be "
                             "finite, >= 0")
        if 0 < self.vocab_size < MIN_VOCAB:
            raise ValueError(f"vocab_size must be 0 (the size's) or at least {MIN_VOCAB}: the 256 byte tokens and "
                             "the special tokens, with room for merges")
        if self.require_sources and self.source:
            raise ValueError("require_sources names installed sources, which --source folders replace: give one")
        if self.seq_len == 1:
            raise ValueError("seq_len must be 0 (the size's) or at least 2: one token has no next token to learn")
        if self.seq_len and SIZES[self.size].short_seq_len and self.seq_len % SIZES[self.size].short_seq_len:
            raise ValueError(f"seq_len must be a multiple of {SIZES[self.size].short_seq_len} for size {self.size}")
        if self.decontam_ngram < 1 or not 0.0 <= self.decontam_min_share < 1.0 or self.corpus_chars < -1:
            raise ValueError("need decontam_ngram >= 1, 0 <= decontam_min_share < 1 and corpus_chars >= -1")

    def preset(self) -> Preset:
        """The size's preset with this config's overrides."""
        p = SIZES[self.size]
        return replace(p, vocab_size=self.vocab_size or p.vocab_size, seq_len=self.seq_len or p.seq_len,
                       batch_size=self.batch_size or p.batch_size,
                       learning_rate=self.learning_rate or p.learning_rate, minutes=self.minutes or p.minutes,
                       corpus_chars=p.corpus_chars if self.corpus_chars < 0 else self.corpus_chars)

    def selection(self) -> Selection:
        return Selection(max_chars=self.preset().corpus_chars, seed=self.seed, ngram=self.decontam_ngram,
                         min_share=self.decontam_min_share)

    def identity(self) -> dict[str, Any]:
        """What the built model depends on besides the corpus (where it goes and tracking excluded)."""
        keep = ("size", "max_steps", "warmup_steps", "bf16", "seed")
        return {"preset": asdict(self.preset()), **{k: getattr(self, k) for k in keep}}
