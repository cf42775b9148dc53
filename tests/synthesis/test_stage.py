"""`kernelwright synthesize` on a CPU: unverified pairs in curation's layout, the held-out suite, the refusal."""

from __future__ import annotations

import json

import pytest

from kernelwright.cli import main
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.ingest import ingest
from kernelwright.curation.stage import check_verified
from kernelwright.errors import UsageError
from kernelwright.synthesis.config import SynthesizeConfig
from kernelwright.synthesis.stage import run_synthesize
from kernelwright.verifier.problems import load_problems


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "out"
    cfg = SynthesizeConfig(tasks=80, seed=3, heldout_share=0.25, verify="none", out=str(out),
                           workdir=str(out.parent / "work"))
    return run_synthesize(cfg), out


def test_pairs_are_written_unverified_and_said_so(synthesized):
    result, out = synthesized
    assert not result.verified
    assert result.train_kept > 0 and result.heldout_kept > 0
    assert result.train_kept + result.heldout_kept <= result.tasks
    metas = [json.loads(p.read_text()) for p in (out / "train").glob("*/meta.json")]
    assert len(metas) == result.train_kept
    assert all(m["verified"] is False and m["verified_by"] is None for m in metas)
    assert all(m["generator_version"] and "signature" in m and "template" in m for m in metas)


def test_the_heldout_suite_loads_and_shares_no_signature_with_training(synthesized):
    result, out = synthesized
    problems = load_problems(out / "heldout")
    assert len(problems) == result.heldout_kept
    manifest = json.loads((out / "manifest.json").read_text())
    assert not set(manifest["signatures"]["train"]) & set(manifest["signatures"]["heldout"])
    held = {p.path.read_text().split("SIGNATURE = ")[1].splitlines()[0].strip('"') for p in problems}
    assert held == set(manifest["signatures"]["heldout"])


def test_curation_refuses_unverified_pairs_unless_allowed(synthesized):
    _, out = synthesized
    corpus, _ = ingest([str(out / "train")], {})
    with pytest.raises(UsageError, match="never verified on a GPU"):
        check_verified(corpus, allow=False)
    check_verified(corpus, allow=True)
    assert CurateConfig().allow_unverified is False


def test_the_command_refuses_unknown_families_and_runs(tmp_path, capsys):
    assert main(["synthesize", "--families", "nonsense", "--workdir", str(tmp_path)]) == 2
    assert "unknown task family nonsense" in capsys.readouterr().err
    code = main(["synthesize", "--tasks", "12", "--verify", "none", "--no-infill", "--workdir", str(tmp_path)])
    assert code == 0
    assert (tmp_path / "synthesize" / "manifest.json").is_file()


def test_the_generators_code_loads_with_its_version() -> None:
    """Every family and the op library are imported with GENERATOR_VERSION, not when a run first draws a family:
    code that changed on disk while a run went on once wrote a later version's solutions under the earlier's
    number."""
    import subprocess
    import sys

    probe = ("import sys, kernelwright.synthesis.generator as g; "
             "print(sorted(m for m in sys.modules if m.startswith('kernelwright.synthesis.')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    for module in ("family_elementwise", "family_gather", "family_matmul", "family_rows", "ops"):
        assert f"kernelwright.synthesis.{module}" in loaded, module
