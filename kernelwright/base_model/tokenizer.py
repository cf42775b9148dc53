"""The base model's tokenizer, and its text as a stream of packed training sequences.

    .venv/bin/kernelwright base-model pretrain --size tiny      # trains the tokenizer first

The tokenizer is a byte-level BPE (`kernelwright.models.train_tokenizer`: GPT-2 pre-tokenisation,
ChatML special tokens and chat template) trained on the first `max_chars` characters of the
pretraining corpus, never on the seed corpus. `packed_blocks` streams the corpus: documents are
encoded a batch at a time, joined with `<|endoftext|>` and cut into blocks of `seq_len` tokens;
the stream starts over (a new epoch) when the corpus ends, and `start` skips blocks already seen.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from transformers import PreTrainedTokenizerFast

from kernelwright.base_model.corpus import Document
from kernelwright.models import BOS, train_tokenizer

ENCODE_BATCH = 64


def train_code_tokenizer(docs: Sequence[Document], vocab_size: int, max_chars: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on the documents' first `max_chars` characters (0: all)."""
    texts, total = [], 0
    for doc in docs:
        if max_chars and total >= max_chars:
            break
        texts.append(doc.text)
        total += len(doc.text)
    return train_tokenizer(texts, vocab_size)


def _token_stream(tokenizer: PreTrainedTokenizerFast, docs: Sequence[Document]) -> Iterator[list[int]]:
    """Each document's ids followed by the separator, a batch of documents encoded at a time."""
    sep = tokenizer.convert_tokens_to_ids(BOS)
    backend = tokenizer.backend_tokenizer
    for at in range(0, len(docs), ENCODE_BATCH):
        batch = backend.encode_batch([d.text for d in docs[at: at + ENCODE_BATCH]], add_special_tokens=False)
        for enc in batch:
            yield [*enc.ids, sep]


def packed_blocks(tokenizer: PreTrainedTokenizerFast, docs: Sequence[Document], seq_len: int,
                  start: int = 0) -> Iterator[list[int]]:
    """Blocks of `seq_len` token ids over the corpus, repeated without end; the first `start` skipped."""
    if not docs:
        raise ValueError("no documents to pack")
    block = 0
    while True:
        buf: list[int] = []
        for ids in _token_stream(tokenizer, docs):
            buf += ids
            while len(buf) >= seq_len:
                if block >= start:
                    yield buf[:seq_len]
                buf = buf[seq_len:]
                block += 1


def corpus_tokens(tokenizer: PreTrainedTokenizerFast, docs: Sequence[Document]) -> int:
    """Tokens in one pass over the corpus (separators included)."""
    return sum(len(ids) for ids in _token_stream(tokenizer, docs))
