"""bench/chain_fidelity.py: reading back which of its problem's ops an answer writes."""

import json
from collections import Counter
from pathlib import Path

from bench.chain_fidelity import classify, count_reading, first_counts, main, sections, stated_counts
from kernelwright.synthesis.generator import generate_tasks

CHAIN = ["neg", "exp_neg_abs", "atan"]


def _body(*stages: list[str]) -> str:
    """Kernel code with one block of op statements per stage, other code between them."""
    blocks = ["\n".join(f"        /* {op} */ v = f(v);" for op in stage) for stage in stages]
    return "__global__ void chain_kernel(float* y) {\n    float v = 0;\n" + "\n    y[0] = v;\n".join(blocks) + "\n}\n"


def test_the_generators_own_solutions_write_their_chain() -> None:
    """Every family's solutions, in every template: a chain written op by op reads back whole (in one block, once
    per code path, or split over a kernel's stages); the one-expression style is not read."""
    seen: dict[str, Counter[str]] = {}
    for task in generate_tasks(600, 3):
        seen.setdefault(task.family, Counter())[classify(list(task.ops), sections(task.solution))] += 1
    assert len(seen) == 6
    for family, counts in seen.items():
        assert set(counts) <= {"match", "untagged"}, family
        assert counts["match"] > 0, family


def test_a_chain_cut_short_left_out_in_the_middle_or_looping() -> None:
    assert classify(CHAIN, sections(_body(CHAIN, CHAIN))) == "match"  # a vectorised body and its tail
    assert classify(CHAIN, sections(_body(CHAIN[:2]))) == "stops_early"
    assert classify(CHAIN, sections(_body(CHAIN, CHAIN[:1]))) == "stops_early"  # the tail cut shorter
    assert classify(CHAIN, sections(_body(["neg", "atan"]))) == "other"  # the middle op left out
    assert classify(CHAIN, sections(_body(["exp_neg_abs", "neg", "atan"]))) == "other"
    assert classify(CHAIN, sections(_body(CHAIN + ["atan"] * 5))) == "repeats"  # a loop on the last op
    assert classify(CHAIN, sections(_body(["neg", "neg", "exp_neg_abs", "atan"]))) == "repeats"
    assert classify(["neg", "neg", "atan"], sections(_body(["neg", "neg", "atan"]))) == "match"  # the chain's own
    assert classify(["neg", "neg", "atan"], sections(_body(["neg", "atan"]))) == "other"
    assert classify(CHAIN, sections("__global__ void k() { v = atanf(expf(-fabsf(-v))); }")) == "untagged"
    assert sections("/* rows */ int r = 0;\n/* tanh */ v = tanhf(v);") == [["tanh"]]  # only op names count
    assert sections("/* 1/2 neg */ v = -v;\n/* 2/2 atan */ v = atanf(v);") == [["neg", "atan"]]  # version 6


def test_a_work_folder_gives_counts_per_class_with_the_correct_ones(tmp_path: Path) -> None:
    work = tmp_path / "W"
    answers = {"elementwise_00001": _body(CHAIN), "elementwise_00002": "/* 1/2 neg */ v = -v;",
               "reduction_00003": "v = 1;", "seed_task": _body(CHAIN)}
    for problem, code in answers.items():
        if problem != "seed_task":  # a problem without a chain is left out
            meta = work / "synthesize" / "heldout_solutions" / problem / "meta.json"
            meta.parent.mkdir(parents=True)
            meta.write_text(json.dumps({"ops": CHAIN}))
            (meta.parent / "solution.py").write_text("/* 1/3 neg */ v = -v;")
        answer = work / "evaluate-seed0-plain-synth" / "generations" / problem / "sample_0.py"
        answer.parent.mkdir(parents=True)
        answer.write_text(code)
    samples = [{"problem_id": "elementwise_00001", "sample": 0, "verdict": {"reason": "ok"}},
               {"problem_id": "elementwise_00002", "sample": 0, "verdict": {"reason": "wrong_output"}}]
    (work / "evaluate-seed0-plain-synth" / "results.json").write_text(json.dumps({"samples": samples}))
    out = tmp_path / "fidelity.json"
    assert main([str(work), "--json", str(out)]) == 0
    (result,) = json.loads(out.read_text())["evaluations"]
    assert result["answers"] == 3
    assert result["counts"] == {"match": 1, "stops_early": 1, "repeats": 0, "other": 0, "untagged": 1}
    assert result["correct"] == {"match": 1, "stops_early": 0, "repeats": 0, "other": 0, "untagged": 0}
    # 2 of 3 ops chosen up front
    assert result["count_up_front"] == {"right": 0, "wrong": 1, "unnumbered": 2, "unread": 0}
    assert main([str(tmp_path / "empty")]) == 2


def test_the_count_each_run_of_tags_chooses_up_front() -> None:
    solution = "/* 1/3 neg */ v = -v;\n/* 2/3 exp_neg_abs */ v = e(v);\n/* 3/3 atan */ v = a(v);\nx = 0;\n" \
               "/* 1/3 neg */ t = -t;\n/* 2/3 exp_neg_abs */ t = e(t);\n/* 3/3 atan */ t = a(t);"
    assert first_counts(solution) == [3, 3]  # a vectorised body and its tail
    assert count_reading(solution, solution) == "right"
    assert count_reading("/* 1/2 neg */ v = -v;\n/* 2/2 atan */ v = a(v);", solution) == "wrong"  # chose 2 of 3
    assert count_reading(solution.replace("1/3 neg */ t", "1/4 neg */ t"), solution) == "wrong"  # the tail alone
    assert count_reading(_body(CHAIN), solution) == "unnumbered"
    for task in generate_tasks(200, 5):  # the generator's own solutions choose right
        assert count_reading(task.solution, task.solution) in ("right", "unnumbered"), task.id


def test_a_solution_written_as_one_expression_states_its_counts_in_its_plan() -> None:
    """Without tags a solution's counts are its plan comment's (one per stage); without either nothing is read."""
    tagged = "/* 1/2 neg */ v = -v;\n/* 2/2 atan */ v = a(v);"
    fused = "// y = 1/2 neg, then 2/2 atan, computed in float\nv = a(-v);"
    assert count_reading(tagged, fused) == "right"
    assert count_reading(tagged.replace("1/2 neg", "1/3 neg"), fused) == "wrong"
    staged = "// first x through 1/1 abs; then the result through 1/3 neg, then 2/3 atan, then 3/3 cos\nv = f(v);"
    assert stated_counts(staged) == [1, 3]
    assert stated_counts("// 1/2 of the rows per block\nv = a(-v);") == []  # no op of synthesis's: no plan item
    assert count_reading(tagged, "// y = neg, then atan\nv = a(-v);") == "unread"
    fused_tasks = [t for t in generate_tasks(300, 7) if not first_counts(t.solution) and t.ops]
    assert fused_tasks  # the generator writes some chains as one expression
    for task in fused_tasks:  # and their plans state each stage's count
        assert stated_counts(task.solution), task.id
