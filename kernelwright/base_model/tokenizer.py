"""The base model's tokenizer, and its text as shuffled training sequences.

    .venv/bin/kernelwright base-model pretrain --size tiny      # trains the tokenizer first

The tokenizer is a byte-level BPE (`train_tokenizer`: GPT-2 pre-tokenisation
with every newline a token of its own, ChatML special tokens and chat template) trained on the
first `max_chars` characters of the pretraining corpus, never on the seed corpus. Its vocabulary
is small for the tiny model (416): a small model learns the statistics of fewer, shorter tokens
sooner, and a word split into pieces has predictable pieces.

`encode_corpus` encodes the whole corpus once (documents joined with `<|endoftext|>`);
`BlockSampler` cuts it into blocks of `block_len` tokens and serves sequences of `units`
consecutive blocks in a seeded shuffle (one permutation per epoch and sequence length). A
sequence is chosen by how many blocks the run has consumed, so a resumed run draws what the
uninterrupted one would have. Shuffling matters: with batches of consecutive blocks of one
document, as a plain stream gives, the tiny model ended 1000 steps at 2.67 bits per character on
the held-out seed answers instead of 2.31.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from kernelwright.base_model.corpus import Document
from kernelwright.prompting import BOS, CHATML_TEMPLATE, EOS, PAD, SPECIAL_TOKENS

ENCODE_BATCH = 64
IGNORE = -100  # a label the loss skips


def train_tokenizer(texts: Iterable[str], vocab_size: int, split_newlines: bool = False) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2 style pre-tokenisation) with ChatML special tokens.
    `split_newlines`: every newline is a token of its own (never merged with the next line's indentation)."""
    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split("\n", behavior="isolated"), byte_level]) if split_newlines else byte_level
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=None
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def train_code_tokenizer(docs: Sequence[Document], vocab_size: int, max_chars: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on the documents' first `max_chars` characters (0: all)."""
    texts, total = [], 0
    for doc in docs:
        if max_chars and total >= max_chars:
            break
        texts.append(doc.text)
        total += len(doc.text)
    return train_tokenizer(texts, vocab_size, split_newlines=True)


def encode_corpus(tokenizer: PreTrainedTokenizerFast, docs: Sequence[Document]) -> torch.Tensor:
    """Every document's ids followed by the separator, as one int64 tensor."""
    if not docs:
        raise ValueError("no documents to encode")
    sep = tokenizer.convert_tokens_to_ids(BOS)
    backend = tokenizer.backend_tokenizer
    ids: list[int] = []
    for at in range(0, len(docs), ENCODE_BATCH):
        for enc in backend.encode_batch([d.text for d in docs[at: at + ENCODE_BATCH]], add_special_tokens=False):
            ids += [*enc.ids, sep]
    return torch.tensor(ids, dtype=torch.long)


@dataclass
class BlockSampler:
    """Sequences of `units` consecutive `block_len`-token blocks of `tokens`, in a seeded shuffle."""

    tokens: torch.Tensor
    block_len: int
    seed: int = 0
    copy_share: float = 0.0  # share of sequences replaced by a repeated run of random corpus tokens (0: none)
    _perms: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict, repr=False)
    _ids: torch.Tensor | None = field(default=None, repr=False)

    def windows(self, units: int) -> int:
        """How many sequences of `units` blocks one pass over the tokens holds."""
        return len(self.tokens) // (self.block_len * units)

    def rows(self, start: int, count: int, units: int) -> torch.Tensor:
        """(count, units * block_len) ids: the sequences drawn after `start` blocks were consumed."""
        return self.batch(start, count, units)[0]

    def batch(self, start: int, count: int, units: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The sequences drawn after `start` blocks were consumed and their labels (the ids, except
        IGNORE over the random first run of a copying exercise)."""
        n = self.windows(units)
        if n == 0:
            raise ValueError(f"the corpus holds {len(self.tokens)} tokens, fewer than one sequence of "
                             f"{units * self.block_len}")
        width = units * self.block_len
        first = -(-start // units)  # sequences of this length already drawn, rounded up
        out = []
        for q in range(first, first + count):
            w = int(self._perm(units, q // n, n)[q % n])
            text = self.tokens[w * width: (w + 1) * width]
            out.append(self._copy_row(width, units, q) if self._is_copy(units, q) else (text, text))
        return _stacked(out)

    def copy_batch(self, key: int, count: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(count, width) copying exercises and their labels, the same for the same `key`: see `_copy_row`."""
        return _stacked([self._copy_row(width, 0, key * 65_537 + i) for i in range(count)])

    def _generator(self, units: int, q: int) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed * 7_919 + units * 104_729 + q)

    def _is_copy(self, units: int, q: int) -> bool:
        return self.copy_share > 0 and float(torch.rand(1, generator=self._generator(units, q))) < self.copy_share

    def _copy_row(self, width: int, units: int, q: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A copying exercise: a run of 8 to width/2 tokens drawn uniformly from the corpus's distinct ids,
        repeated to fill the sequence, and its labels. Only attending back to the run's last occurrence
        predicts what follows, which is how a model learns to copy from its context (an induction
        head). The first run is noise that nothing predicts: its labels are IGNORE, so that the
        exercise teaches copying and not a flatter guess everywhere."""
        gen = self._generator(units, q)
        torch.rand(1, generator=gen)  # the draw that chose this row
        if self._ids is None:
            self._ids = torch.unique(self.tokens)
        run = int(torch.randint(8, max(width // 2, 9), (1,), generator=gen))
        picks = self._ids[torch.randint(0, len(self._ids), (run,), generator=gen)]
        ids = picks.repeat(-(-width // run))[:width]
        labels = ids.clone()
        labels[:run] = IGNORE
        return ids, labels

    def _perm(self, units: int, epoch: int, n: int) -> torch.Tensor:
        key = (units, epoch)
        if key not in self._perms:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + units * 10_007 + epoch)
            self._perms[key] = torch.randperm(n, generator=gen)
        return self._perms[key]


def _stacked(rows: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, labels) rows as one (ids, labels) pair of batches."""
    return torch.stack([ids for ids, _ in rows]), torch.stack([labels for _, labels in rows])
