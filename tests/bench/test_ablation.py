"""The ablation table (bench/cuset_ablation.py) on work folders laid out like the GPU scripts': the
two-mode one of scripts/ablation_gpu.sh and the four modes x two suites of scripts/kernel_model_gpu.sh.
Seeds, modes and suites read from the paths, unfinished evaluations left out, means, spread, counts
and differences to plain, the spread verdicts, the outputs, and the one parent run the ablation's
runs are nested under."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import mlflow
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
ablation = importlib.import_module("cuset_ablation")


def _workdir(tmp_path: Path) -> Path:
    nll = {}
    for seed, (plain, cuset) in enumerate([(0.80, 0.70), (0.82, 0.71), (0.79, 0.72)]):
        for mode, sensitive in (("plain", plain), ("cuset", cuset)):
            nll[f"/x/train-seed{seed}/{mode}/final"] = {"nll_sensitive": sensitive, "nll_other": 0.9 + seed / 100}
    (tmp_path / "heldout_nll.json").write_text(json.dumps(nll))
    for seed, mode, rate, done in [(0, "plain", 0.2, True), (1, "plain", 0.3, True), (0, "cuset", 0.1, True),
                                   (1, "cuset", 0.0, True), (2, "cuset", 0.9, False)]:
        folder = tmp_path / f"evaluate-seed{seed}-{mode}"
        folder.mkdir()
        metrics = {"compile_rate": rate, "fast_0": 0.0, "fast_1": 0.0, "own.fast_0": 0.0, "own.fast_1": 0.0}
        (folder / "results.json").write_text(json.dumps({"metrics": metrics}))
        if done:
            (folder / ".done").touch()
    return tmp_path


def test_table_reads_seeds_and_judges_the_spread(tmp_path: Path) -> None:
    rows = {r.figure: r for r in ablation.table(_workdir(tmp_path))}
    assert rows["nll_sensitive"].plain.values == {0: 0.80, 1: 0.82, 2: 0.79}
    assert rows["nll_sensitive"].verdict == "cuset wins beyond the spread"  # lower NLL on every seed
    assert rows["nll_other"].verdict == "within the spread"  # equal figures
    compile_rate = rows["compile_rate"]
    assert compile_rate.cuset.values == {0: 0.1, 1: 0.0}  # the unfinished seed 2 is left out
    assert compile_rate.verdict == "cuset loses beyond the spread"
    assert compile_rate.paired_diff == {0: -0.1, 1: -0.3}
    assert "n=2" in ablation.markdown(list(rows.values()))


def test_parent_run_nests_the_ablation_runs(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    for name in ("train-ablation", "evaluate", "base-model"):
        with mlflow.start_run(run_name=name):
            pass
    work = tmp_path / "work"
    work.mkdir()
    rows = ablation.table(_workdir(work))
    parent = ablation.log_parent(rows, uri, [])
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    nested = {r.info.run_name for r in runs if r.data.tags.get("mlflow.parentRunId") == parent}
    assert nested == {"train-ablation", "evaluate"}
    top = next(r for r in runs if r.info.run_id == parent)
    assert top.data.tags["result.compile_rate"] == "cuset loses beyond the spread"
    assert top.data.metrics["plain.nll_sensitive.mean"] == pytest.approx(0.8033, abs=1e-4)
    with mlflow.start_run(run_name="evaluate"):  # a run made after the first table, e.g. the champion's
        pass
    assert ablation.log_parent(rows, uri, []) == parent  # a rerun updates the one parent and nests the new run
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert [r.info.run_name for r in runs].count("cuset-ablation") == 1
    assert all(r.data.tags.get("mlflow.parentRunId") == parent for r in runs if r.info.run_name == "evaluate")


def test_heldout_nll_splits_masked_tokens_out_of_the_others(tiny_model_dir: Path) -> None:
    import polars as pl
    import torch

    nll = importlib.import_module("heldout_token_nll")
    ids = [5, 6, 7, 8, 9, 10, 11, 12]  # prompt: the first 3; completion: 5 tokens
    data = pl.DataFrame({"input_ids": [ids], "prompt_len": [3],
                         "sensitive": [[False, False, False, True, False, False, True, False]],
                         "loss_mask": [[False, False, False, True, False, True, True, False]]})
    got = nll.token_nll(tiny_model_dir, data)
    assert (got["tokens_sensitive"], got["tokens_other"], got["tokens_masked"]) == (2.0, 3.0, 2.0)
    model = nll.load_base_model(tiny_model_dir).eval()
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, :-1].float()
    per = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="none").tolist()
    assert got["nll_masked"] == pytest.approx((per[3] + per[6]) / 2, rel=1e-5)  # tokens 4 and 7
    assert got["nll_other"] == pytest.approx((per[3] + per[4] + per[6]) / 3, rel=1e-5)


# four modes x two suites x two seeds, as scripts/kernel_model_gpu.sh lays them out: (synth, infill) figures
SYNTH_RATE = {"plain": (0.2, 0.4), "region": (0.3, 0.3), "cuset": (0.5, 0.6), "cusetA": (0.0, 0.1)}  # per seed
SAMPLES = (10, 12)  # per seed
INFILL_CORRECT = {"plain": (0.5, 0.25), "region": (0.5, 0.5), "cuset": (0.75, 0.5), "cusetA": (0.0, 0.25)}
KIND_N = {"launch_config": (4, 4), "index_guard": (2, 3)}  # per seed; launch_config sorts last of the known kinds


def _results(folder: Path, metrics: dict[str, float], done: bool = True) -> None:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"metrics": metrics}))
    if done:
        (folder / ".done").touch()


def _four_mode_workdir(tmp_path: Path) -> Path:
    for mode in SYNTH_RATE:
        for seed in (0, 1):
            rate, n = SYNTH_RATE[mode][seed], SAMPLES[seed]
            _results(tmp_path / f"evaluate-seed{seed}-{mode}-synth",
                     {"compile_rate": rate, "fast_0": rate / 2, "fast_1": 0.0, "own.fast_0": rate / 4,
                      "own.fast_1": 0.0, "samples": n, "cheat_rate": 0.0})
            infill = {"compile_rate": 0.5, "fast_0": 0.1, "samples": sum(k[seed] for k in KIND_N.values())}
            for kind, ns in KIND_N.items():
                infill |= {f"infill.{kind}.n": ns[seed], f"infill.{kind}.compile_rate": 1.0,
                           f"infill.{kind}.correct_rate": INFILL_CORRECT[mode][seed] if kind == "index_guard" else 0.0}
            _results(tmp_path / f"evaluate-seed{seed}-{mode}-infill", infill)
    _results(tmp_path / "evaluate-seed2-cuset-synth", {"compile_rate": 1.0, "samples": 10}, done=False)  # unfinished
    return tmp_path


def test_modes_and_suites_are_read_from_the_folders(tmp_path: Path) -> None:
    rows = ablation.table(_four_mode_workdir(tmp_path))
    assert ablation.suites(rows) == ["synth", "infill"]
    assert ablation.modes(rows) == ["plain", "region", "cuset", "cusetA"]
    assert [r.figure for r in rows if r.suite == "synth"] == ["compile_rate", "fast_0", "fast_1", "own.fast_0",
                                                               "own.fast_1"]
    assert [r.figure for r in rows if r.suite == "infill"] == [
        "compile_rate", "fast_0", "infill.index_guard.compile_rate", "infill.index_guard.correct_rate",
        "infill.launch_config.compile_rate", "infill.launch_config.correct_rate"]
    assert all(list(r.cells) == ["plain", "region", "cuset", "cusetA"] for r in rows)
    synth = {r.figure: r for r in rows if r.suite == "synth"}
    assert synth["compile_rate"].cells["cuset"].values == {0: 0.5, 1: 0.6}  # the unfinished seed 2 is left out
    assert synth["compile_rate"].name == "synth/compile_rate"


def test_a_suites_heldout_nll_joins_that_suites_table(tmp_path: Path) -> None:
    """`heldout_nll_synth.json` (the NLL on held-out compositions' pairs) sits in the synth table, before the
    evaluation figures; the seed suite gets no rows from it."""
    work = _four_mode_workdir(tmp_path)
    nll = {f"W/train-seed{s}/{m}/final": {"nll_sensitive": 0.1 + s, "nll_other": 0.2, "tokens_sensitive": 7.0}
           for s in (0, 1) for m in ("plain", "cuset")}
    (work / "heldout_nll_synth.json").write_text(json.dumps(nll))
    rows = ablation.table(work)
    assert ablation.suites(rows) == ["synth", "infill"]
    synth = [r for r in rows if r.suite == "synth"]
    assert [r.figure for r in synth[:2]] == ["nll_sensitive", "nll_other"]
    assert synth[0].cells["cuset"].values == {0: 0.1, 1: 1.1} and synth[0].name == "synth/nll_sensitive"
    assert synth[0].unit == "tokens" and synth[0].cells["plain"].count == 14


def test_means_spread_and_differences_to_plain(tmp_path: Path) -> None:
    rows = {(r.suite, r.figure): r for r in ablation.table(_four_mode_workdir(tmp_path))}
    rate = rows[("synth", "compile_rate")]
    plain = rate.cells["plain"]
    assert plain.mean == pytest.approx(0.3)
    assert plain.std == pytest.approx(0.1414214, rel=1e-6)  # sample sd of 0.2, 0.4
    assert (plain.low, plain.high) == (0.2, 0.4)
    assert rate.cells["region"].std == pytest.approx(0.0)
    assert rate.diffs["cuset"] == pytest.approx({0: 0.3, 1: 0.2})
    assert rate.diffs["cusetA"] == pytest.approx({0: -0.2, 1: -0.3})
    assert "plain" not in rate.diffs
    correct = rows[("infill", "infill.index_guard.correct_rate")]
    assert correct.cells["cuset"].mean == pytest.approx(0.625)
    assert correct.diffs["region"] == pytest.approx({0: 0.0, 1: 0.25})


def test_each_mode_against_plain_beyond_the_spread(tmp_path: Path) -> None:
    rows = {(r.suite, r.figure): r for r in ablation.table(_four_mode_workdir(tmp_path))}
    rate = rows[("synth", "compile_rate")]
    # cuset's worst seed (0.5) beats plain's best (0.4); cusetA's best (0.1) is below plain's worst (0.2);
    # region's 0.3, 0.3 lie inside plain's 0.2-0.4
    assert rate.verdicts == {"region": ablation.WITHIN, "cuset": ablation.WINS, "cusetA": ablation.LOSES}
    assert rate.verdict == "cuset wins beyond the spread"
    assert ablation.summary(rate) == "cuset wins beyond the spread; cusetA loses beyond the spread"
    # index_guard correct: cuset 0.75, 0.5 vs plain 0.5, 0.25: its worst only ties plain's best
    assert rows[("infill", "infill.index_guard.correct_rate")].verdicts["cuset"] == ablation.WITHIN
    assert ablation.summary(rows[("synth", "fast_1")]) == ablation.WITHIN  # all equal


def test_one_seed_or_no_baseline_is_no_verdict(tmp_path: Path) -> None:
    _results(tmp_path / "evaluate-seed0-plain-synth", {"compile_rate": 0.1, "samples": 4})
    _results(tmp_path / "evaluate-seed0-cuset-synth", {"compile_rate": 0.9, "samples": 4})
    _results(tmp_path / "evaluate-seed0-wide-synth", {"compile_rate": 0.5, "samples": 4})
    _results(tmp_path / "evaluate-seed0-region-infill", {"compile_rate": 0.5, "samples": 4})
    rows = {(r.suite, r.figure): r for r in ablation.table(tmp_path)}
    synth = rows[("synth", "compile_rate")]
    assert list(synth.cells) == ["plain", "cuset", "wide"]  # a mode outside the known order comes last
    assert synth.verdicts == {"cuset": ablation.ONE_SEED, "wide": ablation.ONE_SEED}
    assert rows[("infill", "compile_rate")].verdicts == {"region": ablation.NOT_COMPARED}


def test_counts_are_samples_summed_over_seeds(tmp_path: Path) -> None:
    rows = {(r.suite, r.figure): r for r in ablation.table(_four_mode_workdir(tmp_path))}
    assert rows[("synth", "compile_rate")].cells["cusetA"].count == 22  # 10 + 12
    assert rows[("synth", "compile_rate")].cells["cusetA"].counts == {0: 10, 1: 12}
    assert rows[("infill", "compile_rate")].cells["plain"].count == 13  # (4 + 2) + (4 + 3)
    assert rows[("infill", "infill.index_guard.correct_rate")].cells["region"].count == 5  # 2 + 3
    assert rows[("infill", "infill.launch_config.compile_rate")].cells["plain"].count == 8
    text = ablation.markdown(list(rows.values()))
    assert "### synth: held-out compositions" in text and "### infill: held-out infill tasks" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("| infill.index_guard.correct_rate | cuset |"))
    assert "| 5 samples |" in line and "s0: +0.2500, s1: +0.2500" in line


def test_old_layout_counts_tokens_and_keeps_its_names(tmp_path: Path) -> None:
    work = _workdir(tmp_path)
    nll = json.loads((work / "heldout_nll.json").read_text())
    for figures in nll.values():
        figures["tokens_sensitive"] = 100.0
    (work / "heldout_nll.json").write_text(json.dumps(nll))
    rows = {r.figure: r for r in ablation.table(work)}
    assert {r.suite for r in rows.values()} == {"seed"}
    assert rows["nll_sensitive"].name == "nll_sensitive"
    assert rows["nll_sensitive"].cells["cuset"].count == 300  # three seeds' tokens
    assert rows["nll_other"].cells["cuset"].count is None  # no token count recorded
    assert rows["compile_rate"].cells["plain"].count is None  # old results.json without samples


def test_outputs_and_parent_run_of_four_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = _four_mode_workdir(tmp_path / "work")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    for name in ("train-ablation", "train", "evaluate", "curate"):
        with mlflow.start_run(run_name=name):
            pass
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["cuset_ablation.py", str(work), "--json", str(out / "t.json"),
                                      "--markdown", str(out / "t.md"), "--png", str(out / "t.png"),
                                      "--tracking-uri", uri])
    out.mkdir()
    ablation.main()
    records = json.loads((out / "t.json").read_text())
    first = records[0]
    assert (first["suite"], first["figure"], first["unit"]) == ("synth", "compile_rate", "samples")
    assert first["modes"]["plain"]["count"] == 22 and first["vs_plain"]["cuset"] == ablation.WINS
    assert (out / "t.md").read_text().count("| compile_rate | cusetA |") == 2  # one line per suite
    assert (out / "t.png").read_bytes()[:4] == b"\x89PNG"
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    parent = next(r for r in runs if r.info.run_name == "cuset-ablation")
    nested = {r.info.run_name for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert nested == {"train-ablation", "train", "evaluate"}
    tags, metrics = parent.data.tags, parent.data.metrics
    assert tags["result.synth/compile_rate"] == "cuset wins beyond the spread; cusetA loses beyond the spread"
    assert tags["result.region.synth/compile_rate"] == ablation.WITHIN
    assert metrics["cusetA.synth/compile_rate.mean"] == pytest.approx(0.05)
    assert metrics["region.infill/infill.index_guard.correct_rate.count"] == 5
    assert {a.path for a in mlflow.MlflowClient().list_artifacts(parent.info.run_id)} == {"t.json", "t.md", "t.png"}


def _one_seed_run(work: Path, seed: int, rates: dict[str, float]) -> Path:
    """A run of the recipe with one seed of each mode, as one device lease holds."""
    for mode, rate in rates.items():
        _results(work / f"evaluate-seed{seed}-{mode}-synth", {"compile_rate": rate, "samples": 30})
    return work


def test_runs_of_one_seed_each_make_one_table(tmp_path: Path) -> None:
    runs = [_one_seed_run(tmp_path / f"run{s}", s, {"plain": 0.2 + s / 10, "cuset": 0.25 + s / 10}) for s in (0, 1, 2)]
    row = next(r for r in ablation.table(*runs) if r.figure == "compile_rate")
    assert row.plain.values == pytest.approx({0: 0.2, 1: 0.3, 2: 0.4}) and row.plain.count == 90
    assert row.paired_diff == pytest.approx({0: 0.05, 1: 0.05, 2: 0.05})  # paired within each run
    assert row.verdicts["cuset"] == ablation.WITHIN  # better on every seed, yet not beyond the spread


def test_a_seed_held_by_two_runs_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _one_seed_run(tmp_path / "a", 0, {"plain": 0.2})
    second = _one_seed_run(tmp_path / "b", 0, {"plain": 0.3})
    with pytest.raises(ablation.SeedClash, match="seed 0 of plain .* both .*a and .*b"):
        ablation.table(first, second)
    monkeypatch.setattr(sys, "argv", ["cuset_ablation.py", str(first), str(second)])
    with pytest.raises(SystemExit, match="seeds of its own"):
        ablation.main()


def test_nll_rows_get_a_panel_of_their_own(tmp_path: Path) -> None:
    work = _four_mode_workdir(tmp_path)
    figures = {"nll_sensitive": 0.02, "nll_masked": 1.5}
    nll = {f"/x/train-seed{s}/{m}/final": figures for s in (0, 1) for m in SYNTH_RATE}
    (work / "heldout_nll_synth.json").write_text(json.dumps(nll))
    parts = [(suite, is_nll, [r.figure for r in rows]) for suite, is_nll, rows in ablation.panels(ablation.table(work))]
    assert [p[:2] for p in parts] == [("synth", True), ("synth", False), ("infill", False)]
    assert parts[0][2] == ["nll_sensitive", "nll_masked"] and "compile_rate" in parts[1][2]


def test_the_other_tokens_less_the_masked_ones(tmp_path: Path) -> None:
    """The held-out 'other' tokens include the masked ones: their NLL apart is derived from the counts."""
    nll = {"/x/train-seed0/plain/final": {"nll_other": 0.05, "tokens_other": 1000.0, "nll_masked": 2.0,
                                          "tokens_masked": 10.0},
           "/x/train-seed0/cuset/final": {"nll_other": 0.07, "tokens_other": 1000.0}}  # no masked count: none
    (tmp_path / "heldout_nll_synth.json").write_text(json.dumps(nll))
    row = next(r for r in ablation.table(tmp_path) if r.figure == "nll_other_unmasked")
    assert row.plain.values == {0: pytest.approx((0.05 * 1000 - 2.0 * 10) / 990)} and row.plain.count == 990
    assert "cuset" not in row.cells


def test_a_saved_table_stands_in_for_its_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU host keeps no work folder: seed 0's table, read back, joins later runs' folders as they were."""
    first = _one_seed_run(tmp_path / "run0", 0, {"plain": 0.2, "cuset": 0.25})
    saved = tmp_path / "seed0.json"
    monkeypatch.setattr(sys, "argv", ["cuset_ablation.py", str(first), "--json", str(saved)])
    ablation.main()
    later = [_one_seed_run(tmp_path / f"run{s}", s, {"plain": 0.2 + s / 10, "cuset": 0.25 + s / 10}) for s in (1, 2)]
    row = next(r for r in ablation.table(saved, *later) if r.figure == "compile_rate")
    assert row.plain.values == pytest.approx({0: 0.2, 1: 0.3, 2: 0.4}) and row.plain.count == 90
    assert row.paired_diff == pytest.approx({0: 0.05, 1: 0.05, 2: 0.05})
    with pytest.raises(ablation.SeedClash, match="seed 0 of .* both .*seed0.json and .*run0"):
        ablation.table(saved, first)
    (tmp_path / "junk.json").write_text('{"not": "a table"}')
    monkeypatch.setattr(sys, "argv", ["cuset_ablation.py", str(tmp_path / "junk.json")])
    with pytest.raises(SystemExit, match="junk.json: not a table written by cuset_ablation.py"):
        ablation.main()


def test_a_pooled_fisher_p_beside_the_spread_rule() -> None:
    stats = importlib.import_module("ablation_stats")
    plain = ablation.Cell({0: 2 / 7, 1: 2 / 7}, {0: 7, 1: 7})
    region = ablation.Cell({0: 3 / 7, 1: 4 / 7}, {0: 7, 1: 7})
    row = ablation.compare("infill", "infill.index_guard.correct_rate", {"plain": plain, "region": region})
    # every seed of region beats every seed of plain, yet 7 of 14 against 4 of 14 is well within chance
    assert row.verdicts["region"] == ablation.WINS and row.p_values["region"] == pytest.approx(0.44, abs=0.01)
    far = ablation.compare("synth", "compile_rate", {"plain": ablation.Cell({0: 19 / 30, 1: 20 / 30}, {0: 30, 1: 30}),
                                                     "cuset": ablation.Cell({0: 9 / 30, 1: 4 / 30}, {0: 30, 1: 30})})
    assert far.p_values["cuset"] < 1e-4
    assert "| 0.44 |" in ablation.markdown([row])
    assert ablation.record(row)["p_pooled"]["region"] == row.p_values["region"]
    nll = ablation.compare("synth", "nll_sensitive", {"plain": ablation.Cell({0: 0.8}, {0: 100}),
                                                      "cuset": ablation.Cell({0: 0.7}, {0: 100})})
    assert nll.p_values == {"cuset": None}  # not a rate
    assert stats.pooled_fisher_p({0: 0.5}, {}, {0: 0.4}, {0: 10}) is None  # no count
    assert stats.pooled_fisher_p({0: 0.55}, {0: 10}, {0: 0.4}, {0: 10}) is None  # 5.5 successes: not a rate of 10
