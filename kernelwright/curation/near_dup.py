"""Near-duplicate removal: MinHash/LSH (datasketch) over shingles of normalised code tokens.

    kernelwright curate --input corpus.jsonl --near-dup-threshold 0.85 --near-dup-shingle 5 --out DIR

An item is a near duplicate when the Jaccard similarity of its shingle set with an earlier kept
item's is at least `threshold`: LSH proposes candidates, the exact Jaccard of the two shingle
sets decides. The first item of each group is kept (input order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from datasketch import MinHash, MinHashLSH

from kernelwright.code_norm import shingles

LSH_MAX_THRESHOLD = 0.9


@dataclass(frozen=True)
class NearDuplicate:
    of: str  # id of the kept item it duplicates
    jaccard: float


def _minhash(grams: set[str], num_perm: int) -> MinHash:
    m = MinHash(num_perm=num_perm)
    m.update_batch([g.encode("utf-8") for g in grams])
    return m


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def near_duplicates(items: Sequence[tuple[str, Sequence[str]]], threshold: float = 0.85, shingle: int = 5,
                    num_perm: int = 128) -> dict[str, NearDuplicate]:
    """(id, normalised code tokens: `code_norm.code_tokens`) items -> {id of each near duplicate:
    the kept item it repeats}."""
    # LSH only proposes candidates (exact Jaccard decides); above ~0.9 datasketch finds no band split
    lsh = MinHashLSH(threshold=min(threshold, LSH_MAX_THRESHOLD), num_perm=num_perm)
    kept: dict[str, set[str]] = {}
    found: dict[str, NearDuplicate] = {}
    for key, tokens in items:
        grams = shingles(tokens, shingle)
        m = _minhash(grams, num_perm)
        scored = [(jaccard(grams, kept[c]), c) for c in lsh.query(m)]
        best = max(scored, default=(0.0, ""))
        if best[0] >= threshold:
            found[key] = NearDuplicate(of=best[1], jaccard=round(best[0], 4))
            continue
        lsh.insert(key, m)
        kept[key] = grams
    return found
