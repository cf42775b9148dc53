"""Base-model p_t: the batched scorer against one-sequence-at-a-time log-softmax, and chunked resume.

    .venv/bin/python -m pytest tests/curation/test_confidence.py
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from kernelwright.curation import confidence
from kernelwright.curation.confidence import (
    ConfidenceScorer,
    gold_token_probs,
    length_batches,
    model_fingerprint,
    score_chunked,
)
from kernelwright.models import load_base_model, load_tokenizer


def _sequences(n: int = 11, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = [1, 2, *torch.randint(3, 60, (n - 2,), generator=g).tolist()]
    return [torch.randint(5, 1000, (k,), generator=g).tolist() for k in lengths]


@torch.inference_mode()
def _reference(model, sequences: list[list[int]]) -> list[list[float]]:
    """The textbook computation: one unpadded sequence at a time, full float32 log-softmax."""
    out = []
    for seq in sequences:
        ids = torch.tensor([seq])
        logp = torch.log_softmax(model(input_ids=ids).logits.float()[0, :-1], dim=-1)
        out.append([math.nan] + logp.gather(-1, ids[0, 1:, None]).squeeze(-1).exp().tolist())
    return out


def _assert_close(got: list[list[float]], want: list[list[float]], tol: float = 1e-5) -> None:
    assert [len(g) for g in got] == [len(w) for w in want]
    for g, w in zip(got, want, strict=True):
        assert all(math.isnan(a) and math.isnan(b) or abs(a - b) <= tol for a, b in zip(g, w, strict=True))


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path):
    return load_base_model(tiny_model_dir, device="cpu").eval()


def test_length_batches_respect_the_padded_token_budget() -> None:
    lengths = [5, 40, 7, 12, 40, 3, 100]
    batches = length_batches(lengths, 80)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[0] == [6]  # longer than the budget: alone
    for b in batches[1:]:
        assert max(lengths[i] for i in b) * len(b) <= 80
        assert lengths[b[0]] == max(lengths[i] for i in b)


def test_batched_scorer_matches_one_at_a_time(model) -> None:
    seqs = _sequences()
    want = _reference(model, seqs)
    assert want[0] == [] or math.isnan(want[0][0])
    _assert_close(gold_token_probs(model, seqs, pad_id=0, batch_tokens=120), want)
    _assert_close(ConfidenceScorer(model, 0, batch_tokens=10_000, head_chunk=7).probs(seqs), want)


def test_generic_path_for_models_that_post_process_logits(model, monkeypatch) -> None:
    monkeypatch.setattr(confidence, "_decoder_and_head", lambda m: None)
    seqs = _sequences(seed=1)
    _assert_close(ConfidenceScorer(model, 0, batch_tokens=200, head_chunk=16).probs(seqs), _reference(model, seqs))


def test_empty_and_single_token_sequences(model) -> None:
    got = gold_token_probs(model, [[], [7], [7, 8]], pad_id=0)
    assert got[0] == [] and len(got[1]) == 1 and math.isnan(got[1][0]) and len(got[2]) == 2
    assert gold_token_probs(model, [[], [3]], pad_id=0)[0] == []


class _Counting(ConfidenceScorer):
    """Counts the sequences the model actually scores."""

    scored: int = 0

    def probs(self, sequences, advance=None):
        self.scored += len(sequences)
        return super().probs(sequences, advance)


def test_resume_recomputes_only_missing_or_stale_chunks(model, tiny_model_dir: Path, tmp_path: Path) -> None:
    seqs = _sequences(n=10, seed=2)
    keys = [f"s{i}" for i in range(len(seqs))]
    fp = model_fingerprint(model, load_tokenizer(tiny_model_dir))
    first = score_chunked(ConfidenceScorer(model, 0, 64), seqs, keys, tmp_path, fp, chunk_samples=4)
    assert first.computed == [0, 1, 2] and first.reused == []
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == [f"part-0000{i}.parquet" for i in range(3)]
    _assert_close(first.probs, _reference(model, seqs))

    (tmp_path / "part-00001.parquet").unlink()
    again = _Counting(model, 0, 64)
    second = score_chunked(again, seqs, keys, tmp_path, fp, chunk_samples=4)
    assert second.computed == [1] and second.reused == [0, 2] and again.scored == 4
    _assert_close(second.probs, first.probs, tol=0.0)  # read back bit for bit

    (tmp_path / "part-00002.parquet").write_bytes(b"not parquet")  # a torn or foreign file
    assert score_chunked(again, seqs, keys, tmp_path, fp, chunk_samples=4).computed == [2]

    stale = {**fp, "model": "another/checkpoint"}
    third = score_chunked(_Counting(model, 0, 64), seqs, keys, tmp_path, stale, chunk_samples=4)
    assert third.computed == [0, 1, 2]
    changed = [*seqs[:5], [*seqs[5], 9], *seqs[6:]]  # one sample's tokens change: only its chunk
    assert score_chunked(again, changed, keys, tmp_path, stale, chunk_samples=4).computed == [1]
    fewer = score_chunked(again, seqs[:4], keys[:4], tmp_path, stale, chunk_samples=4)
    assert fewer.reused == [0] and [p.name for p in tmp_path.glob("*.parquet")] == ["part-00000.parquet"]


def test_compiled_head_falls_back_to_eager_when_compiling_fails(monkeypatch) -> None:
    """No triton (or any backend failure): the fused head quietly becomes the eager computation."""
    calls = []

    def broken_compile(fn, **_kw):
        def run(*_args):
            calls.append("compiled")
            raise RuntimeError("backend compiler failed: no triton")
        return run

    monkeypatch.setattr(confidence.torch, "compile", broken_compile)
    head = confidence._compiled_or_eager(confidence._gold_probs, None)
    logits, gold = torch.randn(5, 11), torch.randint(0, 11, (5,))
    want = confidence._gold_probs(logits, gold)
    assert torch.equal(head(logits, gold), want)
    assert torch.equal(head(logits, gold), want)
    assert calls == ["compiled"]  # tried once, then eager only


def test_compile_is_on_by_default_only_on_a_gpu(model) -> None:
    assert ConfidenceScorer(model, 0).compile is False  # the model is on the CPU


def test_compiled_layers_that_fail_fall_back_to_eager(tiny_model_dir: Path, monkeypatch) -> None:
    """A backend that cannot compile (here: one that raises) leaves the layers eager and the
    scores unchanged."""
    fresh = load_base_model(tiny_model_dir, device="cpu").eval()  # compiled in place: not the shared one

    def broken(fn, **_kw):
        def fail(*_a, **_k):
            raise RuntimeError("backend unavailable")
        return fail

    monkeypatch.setattr(torch, "compile", broken)
    scorer = ConfidenceScorer(fresh, 0, batch_tokens=200, compile=True)
    assert all(layer._compiled_call_impl is not None for layer in fresh.model.layers)
    seqs = _sequences(seed=2)
    got = scorer.probs(seqs)
    monkeypatch.undo()
    assert all(layer._compiled_call_impl is None for layer in fresh.model.layers)
    _assert_close(got, _reference(fresh, seqs))
