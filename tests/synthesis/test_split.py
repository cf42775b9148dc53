"""The held-out split by composition signature never leaks, and decontamination removes what overlaps."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kernelwright.synthesis.ops import OPS
from kernelwright.synthesis.split import decontaminate, heldout_signature, split_tasks
from kernelwright.synthesis.task import SynthTask

NAMES = sorted(OPS)
TAILS = ["", "sum@rows", "softmax", "layernorm", "matmul_bias"]


def task(i: int, ops: tuple[str, ...], tail: str, reference: str = "", solution: str = "") -> SynthTask:
    return SynthTask(id=f"t{i}", family="elementwise", ops=ops, tail=tail, dtype="float32",
                     reference=reference or f"# ref {i}", solution=solution or f"# sol {i}", template="x", seed=i)


compositions = st.lists(st.tuples(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5).map(tuple),
                                  st.sampled_from(TAILS)), min_size=1, max_size=200)


@settings(max_examples=60, deadline=None)
@given(compositions, st.integers(0, 2**31), st.floats(0.05, 0.5))
def test_no_signature_is_on_both_sides(comps, seed, share):
    tasks = [task(i, ops, tail) for i, (ops, tail) in enumerate(comps)]
    train, heldout = split_tasks(tasks, seed, share)
    assert len(train) + len(heldout) == len(tasks)
    assert not {t.signature for t in train} & {t.signature for t in heldout}


@settings(max_examples=40, deadline=None)
@given(compositions, st.integers(0, 2**31))
def test_the_split_of_a_signature_does_not_depend_on_the_other_tasks(comps, seed):
    tasks = [task(i, ops, tail) for i, (ops, tail) in enumerate(comps)]
    _, heldout_all = split_tasks(tasks, seed, 0.3)
    _, heldout_half = split_tasks(tasks[: len(tasks) // 2], seed, 0.3)
    assert {t.id for t in heldout_half} <= {t.id for t in heldout_all}


def test_the_op_order_does_not_change_the_signature_but_the_tail_does():
    assert task(0, ("relu", "tanh"), "").signature == task(1, ("tanh", "relu"), "").signature
    assert task(0, ("relu",), "").signature != task(1, ("relu",), "softmax").signature


def test_the_share_held_out_is_about_what_was_asked():
    rng = random.Random(0)
    sigs = {"+".join(sorted(rng.sample(NAMES, 3))) + "|" for _ in range(4000)}
    held = sum(heldout_signature(s, 7, 0.2) for s in sigs)
    assert 0.15 < held / len(sigs) < 0.25
    assert not any(heldout_signature(s, 7, 0.0) for s in sigs)


def test_decontamination_by_ngram_and_by_declared_signature(tmp_path):
    problem = "\n".join(f"def f{i}(x):\n    return x * {i} + torch.relu(x) - {i}" for i in range(30))
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "p.py").write_text(problem)
    (tmp_path / "suite" / "synth.py").write_text('SIGNATURE = "abs+relu|"\nimport torch\n')
    tasks = [task(0, ("tanh",), "", reference=problem), task(1, ("relu", "abs"), ""), task(2, ("sin",), ""),
             task(3, ("cos",), "", solution="unrelated text")]
    result = decontaminate(tasks, [tmp_path / "suite"], {"seed/x": "def g(): pass"}, {"cos|"}, 13, 0.5)
    assert [t.id for t in result.kept] == ["t2"]
    assert result.by_ngram == {"t0": "p"}
    assert result.by_signature == {"t1": "abs+relu|", "t3": "cos|"}
