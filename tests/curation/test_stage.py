from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from kernelwright.curation.filters import FilterReport
from kernelwright.curation.stage import CurateConfig, _innermost, curate_samples, seed_samples, tokenize_sample
from kernelwright.errors import UsageError
from kernelwright.models import load_base_model, load_tokenizer


def test_too_long_samples_are_dropped_before_weighting(tiny_model_dir: Path) -> None:
    tok = load_tokenizer(tiny_model_dir)
    model = load_base_model(tiny_model_dir, device="cpu").eval()
    samples = seed_samples("train")[:4]
    lengths = [len(t["prompt_ids"]) + len(t["completion_ids"]) for t in (tokenize_sample(tok, s) for s in samples)]
    limit = sorted(lengths)[1]  # the two shortest fit
    report = FilterReport(input_rows=len(samples))
    data, stats = curate_samples(samples, tok, model, CurateConfig(max_length=limit), report=report)
    assert data.height == stats["samples"] == sum(n <= limit for n in lengths)
    assert len(report.removed["too_long"]) == sum(n > limit for n in lengths)
    assert data["sample_weight"].mean() == pytest.approx(1.0, abs=1e-6)  # normalised over what is kept
    # labels line up with input_ids, -100 on the prompt
    row = data.row(0, named=True)
    assert len(row["labels"]) == len(row["input_ids"]) == len(row["token_weights"])
    assert row["labels"][: row["prompt_len"]] == [-100] * row["prompt_len"]
    with pytest.raises(UsageError, match="max_length"):
        curate_samples(samples, tok, model, CurateConfig(max_length=min(lengths) - 1))


def _corpus(path: Path) -> Path:
    import json

    from kernelwright.seed import load_seed_tasks

    recs = [{"level_id": 1, "task_id": i + 1, "ref_code": t.reference, "custom_code": t.solution}
            for i, t in enumerate(load_seed_tasks()[::24][:3])]
    recs.append({"level_id": 1, "task_id": 9, "ref_code": recs[0]["ref_code"], "custom_code": None})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + "{broken\n")
    return path


def test_curate_cli_on_an_input_corpus(tmp_path: Path, tiny_model_dir: Path) -> None:
    import json

    import polars as pl
    from mlflow.tracking import MlflowClient

    from kernelwright.cli import main
    from kernelwright.workdir import tracking_uri

    corpus, out, wd = _corpus(tmp_path / "c.jsonl"), tmp_path / "out", tmp_path / "wd"
    args = ["curate", "--input", str(corpus), "--map", "prompt=ref_code,completion=custom_code",
            "--base-model", str(tiny_model_dir), "--out", str(out), "--workdir", str(wd)]
    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())["filters"]
    assert (report["input_rows"], report["kept"], report["parse_errors"]["count"]) == (5, 3, 2)
    assert pl.read_parquet(out / "data.parquet").height == 3
    assert pl.read_parquet(out / "ingested.parquet").height == 5
    client = MlflowClient(tracking_uri(wd))
    run = client.search_runs([client.get_experiment_by_name("kernelwright").experiment_id])[0]
    assert run.data.params["curate.near_dup_threshold"] == "0.85"
    assert {i.dataset.name for i in run.inputs.dataset_inputs} >= {"c.jsonl", "curated"}
    assert main([*args[:4], "prompt=ref_code,completion=kernel", *args[5:]]) == 2  # missing column: exit 2


CL1_LIKE = Path(__file__).resolve().parents[1] / "fixtures" / "curation" / "cl1_like.jsonl"


def test_curate_cli_says_which_filters_emptied_the_corpus(tmp_path: Path, tiny_model_dir: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Every row of the fixture is removed, only one of them by the length limit: the error counts
    each filter's removals and points at report.json, written before it."""
    import json

    from kernelwright.cli import main

    out = tmp_path / "out"
    args = ["curate", "--input", str(CL1_LIKE), "--map", "prompt=ref_code,completion=custom_code",
            "--base-model", str(tiny_model_dir), "--out", str(out), "--workdir", str(tmp_path / "wd"),
            "--nvrtc", "false", "--max-length", "64"]
    assert main(args) == 2
    message = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    expected = ("nothing left to write: 3 did not parse, 1 harness_tampering, 2 fallback_try_except, "
                "2 fallback_torch_op, 1 no_kernel, 1 longer than max_length=64; "
                f"see {out / 'report.json'}")
    assert expected in message and "Traceback" not in message
    report = json.loads((out / "report.json").read_text())["filters"]
    assert (report["input_rows"], report["kept"], report["parse_errors"]["count"]) == (10, 0, 3)
    counts = {k: v["count"] for k, v in report["removed"].items() if v["count"]}
    assert counts == {"harness_tampering": 1, "fallback_try_except": 2, "fallback_torch_op": 2, "no_kernel": 1,
                      "too_long": 1}
    assert not list(out.glob(".*.tmp")) and not (out / "data.parquet").exists()


def test_polars_scatter_keeps_the_last_write_of_a_repeated_index() -> None:
    """`_innermost` paints spans outermost first and relies on this."""
    s = pl.Series("x", [None] * 4, dtype=pl.UInt32).scatter([1, 2, 1, 1, 3, 2], [5, 6, 7, 8, 9, 0])
    assert s.to_list() == [None, 8, 0, 9]


def _runs(spans: list[tuple[int, int, str]]) -> pl.DataFrame:
    """Spans over rows whose character offsets are their row numbers: a span [s, e) covers rows s..e-1."""
    return pl.DataFrame({"sample": [0] * len(spans), "s_start": [s for s, _, _ in spans],
                         "s_end": [e for _, e, _ in spans], "kind": [k for _, _, k in spans],
                         "_lo": [s for s, _, _ in spans], "_hi": [e for _, e, _ in spans]},
                        schema_overrides={"_lo": pl.UInt32, "_hi": pl.UInt32})


def _kind_per_row(spans: list[tuple[int, int, str]], n_rows: int) -> list[str | None]:
    best, kinds = _innermost(_runs(spans), n_rows)
    return [None if b is None else kinds[b] for b in best.to_list()]


def test_innermost_span_ties_go_to_the_earlier_span_then_the_kind_name() -> None:
    spans = [(0, 6, "launch_config"), (2, 5, "barrier"), (1, 4, "shared_decl"), (2, 5, "atomic")]
    # row 0, 5: the outer span alone; 1-3: the two length-3 spans at 1 and 2, the earlier wins;
    # row 4: [2, 5) twice, the same length and start: "atomic" before "barrier"
    assert _kind_per_row(spans, 7) == ["launch_config", "shared_decl", "shared_decl", "shared_decl", "atomic",
                                       "launch_config", None]


def test_innermost_span_matches_a_brute_force_pick() -> None:
    rng = random.Random(0)
    n_rows = 300
    spans = [(s, s + rng.randint(1, 40), rng.choice(["atomic", "barrier", "thread_index"]))
             for s in (rng.randrange(n_rows - 40) for _ in range(400))]
    expected = [min(((e - s, s, k) for s, e, k in spans if s <= row < e), default=(0, 0, None))[2]
                for row in range(n_rows)]
    assert _kind_per_row(spans, n_rows) == expected
