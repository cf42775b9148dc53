"""GRPO on the tiny model with an injected judge (no GPU): steps, checkpoints, resume after a kill, MLflow."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from kernelwright.checkpoints import RUN_ID_FILE, TimeLimit, last_complete_checkpoint
from kernelwright.config import parse_config
from kernelwright.errors import UsageError
from kernelwright.infill_format import MARKER_RE
from kernelwright.rl.config import RLConfig
from kernelwright.rl.curriculum import curriculum_items, load_curriculum, set_aside
from kernelwright.rl.judging import JudgeItem
from kernelwright.rl.stage import grpo_args, load_policy, rl_command, run_rl
from kernelwright.store import Store
from kernelwright.tracking import EXPERIMENT, REGISTERED_MODEL, config_artifact, tracking_session
from kernelwright.verifier.verdict import Verdict
from tests.rl._data import make_data

# what the fake judge answers, in turn: a fast correct kernel, a wrong one, a build failure and a cheat that
# claims a 10x speedup
ANSWERS = (Verdict.of("ok", compile_s=1.0, speedup=2.0, custom_kernel_time_share=1.0),
           Verdict.of("wrong_output", compile_s=1.0), Verdict.of("compile_error"),
           Verdict.of("result_caching", compile_s=1.0, speedup=10.0, custom_kernel_time_share=1.0))


class Killed(Exception):
    """Stands for the process being killed in the middle of a step."""


@dataclass
class FakeJudge:
    kill_at_call: int | None = None  # raise on this call (1-based), as a kill during that step would
    batches: list[list[tuple[str, str]]] = field(default_factory=list)  # (problem, candidate) texts per call

    def __call__(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        if self.kill_at_call is not None and len(self.batches) + 1 == self.kill_at_call:
            raise Killed
        self.batches.append([(it.problem.read_text(), it.candidate.read_text()) for it in items])
        return [ANSWERS[i % len(ANSWERS)] for i in range(len(items))]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_data(tmp_path_factory.mktemp("rl-data"))


def config(data: Path, out: Path, model: Path, **kw: Any) -> RLConfig:
    base: dict[str, Any] = dict(model=str(model), data=str(data), out=str(out), workdir=str(out.parent / "wd"),
                                steps=2, infill_steps=1, num_generations=2, per_device_train_batch_size=4,
                                max_completion_length=8, learning_rate=1e-4, save_steps=1, samples_every=1,
                                system_metrics=False)
    return RLConfig(**{**base, **kw})


def test_grpo_trains_on_the_judge_reward_and_writes_checkpoints(data: Path, tmp_path: Path,
                                                                tiny_model_dir: Path) -> None:
    judge = FakeJudge()
    cfg = config(data, tmp_path / "rl", tiny_model_dir)
    result = run_rl(cfg, judge=judge)
    assert result.global_step == 2 and result.reward_mode == "injected" and result.run_id is None
    assert len(judge.batches) == 2  # one judged batch per step
    items = curriculum_items(load_curriculum(data), cfg)
    refs = [it.reference for it in items]
    for problem, candidate in judge.batches[0]:  # phase 1: infill answers spliced into their partial solution
        partial = next(it.partial for it in items[:2] if it.reference == problem)
        head, _, tail = partial.partition(MARKER_RE.search(partial).group(0))  # type: ignore[union-attr]
        assert candidate.startswith(head) and candidate.endswith(tail)
    assert all(problem in refs[2:] for problem, _ in judge.batches[1])  # phase 2: whole problems
    judged = sum(len(b) for b in judge.batches)
    assert result.completions == 8 and judged <= 8  # completions without code are not judged (no_candidate)
    cheats = sum(1 for b in judge.batches for i in range(len(b)) if i % len(ANSWERS) == 3)
    assert result.cheat_rate == cheats / 8 and result.reasons.get("result_caching", 0) == cheats
    assert str(last_complete_checkpoint(tmp_path / "rl")).endswith("checkpoint-2")
    assert (tmp_path / "rl" / "final" / "config.json").is_file()
    assert not list((tmp_path / "rl" / "candidates").iterdir())  # each batch's files are removed once judged


def test_a_killed_run_resumes_from_its_checkpoint_into_the_same_mlflow_run(data: Path, tmp_path: Path,
                                                                          tiny_model_dir: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "rl"
    cfg = config(data, out, tiny_model_dir, steps=3, tracking_uri=uri, beta=0.1)
    with pytest.raises(Killed):
        rl_command(cfg, judge=FakeJudge(kill_at_call=3))
    assert str(last_complete_checkpoint(out)).endswith("checkpoint-2") and not (out / "final").exists()
    first_run = (out / RUN_ID_FILE).read_text().strip()

    judge = FakeJudge()
    more = config(data, out, tiny_model_dir, steps=4, tracking_uri=uri, beta=0.1)
    result = rl_command(more, judge=judge)
    assert result.resumed_from is not None and result.resumed_from.endswith("checkpoint-2")
    assert result.global_step == 4 and len(judge.batches) == 2  # steps 3 and 4 only
    items = curriculum_items(load_curriculum(data), more)
    assert {p for p, _ in judge.batches[0] + judge.batches[1]} <= {it.reference for it in items[4:]}
    assert result.run_id == first_run and result.registered_version == "1"
    card = (out / "README.md").read_text()  # kernelwright's card, not TRL's hub draft
    assert card.startswith("# kernelwright rl: rl") and f"`{first_run}`" in card and "huggingface.co" not in card

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id], filter_string="tags.`kernelwright.stage` = 'rl'")
    assert run.info.run_id == first_run
    assert run.data.params["reward_mode"] == "injected" and run.data.params["kw.steps"] == "3"
    assert run.data.tags["kw.resumed_with.kw.steps"] == "4"
    settings = client.download_artifacts(first_run, config_artifact("rl"), str(tmp_path / "settings"))
    assert parse_config(RLConfig, ["--config", settings], "t").steps == 3  # the run's first settings, kept
    assert [m.step for m in client.get_metric_history(first_run, "reward/total")] == [1, 2, 3, 4]
    for name in ("reward/format", "reward/compile", "reward/correct", "reward/speed", "reward/penalty",
                 "reason/result_caching", "reason/ok", "rl/cheat_rate", "rl/cheat_positive", "kl", "rl/reward_s"):
        assert name in run.data.metrics, name
    assert run.data.metrics["rl/cheat_positive"] == 0
    curves = client.download_artifacts(first_run, "rl_curves.json", str(tmp_path / "curves"))
    summary = json.loads(Path(curves).read_text())  # the curves of all four steps, the resumed ones included
    assert summary["steps"] == 4 and summary["completions"] == 16 and summary["phase_turn_step"] == 2
    assert summary["judge_share_of_step_mean"] is not None and 0 < summary["judge_share_of_step_mean"] <= 1
    assert (out / "rl_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "rl_curves.png" in [a.path for a in client.list_artifacts(first_run)]
    samples = [a.path for a in client.list_artifacts(first_run, "samples")]
    assert samples == [f"samples/step_{n:06d}.json" for n in (1, 2, 3, 4)]
    version = client.get_model_version(REGISTERED_MODEL, "1")
    assert version.run_id == first_run and version.tags["method"] == "grpo"
    assert str(client.get_model_version_by_alias(REGISTERED_MODEL, "candidate").version) == "1"

    # the registered version is a policy the next run can start from: saved locally first, where TRL's reference
    # model (the KL term) is loaded from too
    with tracking_session(Store.resolve(tmp_path / "wd", uri)):
        next_cfg = RLConfig(model=f"models:/{REGISTERED_MODEL}@candidate")
        model, tokenizer, source = load_policy(next_cfg, tmp_path / "next", resuming=False)
    assert source == f"models:/{REGISTERED_MODEL}/1" and tokenizer.chat_template
    assert model.config._name_or_path == str(tmp_path / "next" / "start")


def test_resume_off_refuses_an_output_folder_with_checkpoints(data: Path, tmp_path: Path) -> None:
    (tmp_path / "rl" / "checkpoint-3").mkdir(parents=True)
    (tmp_path / "rl" / "checkpoint-3" / "trainer_state.json").write_text("{}")
    with pytest.raises(UsageError, match="--resume true"):
        run_rl(config(data, tmp_path / "rl", tmp_path / "no-model", resume=False), judge=FakeJudge())


def test_a_time_budget_ends_the_run_after_a_step_with_a_checkpoint_a_later_run_resumes(
        data: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "rl"
    stopped = run_rl(config(data, out, tiny_model_dir, steps=3, max_minutes=1e-9, save_steps=25),
                     judge=FakeJudge())
    assert stopped.stopped_by_time and stopped.global_step == 1  # the first step ends past the budget
    assert str(last_complete_checkpoint(out)).endswith("checkpoint-1") and (out / "final" / "config.json").is_file()
    judge = FakeJudge()
    rest = run_rl(config(data, out, tiny_model_dir, steps=3), judge=judge)
    assert rest.resumed_from is not None and rest.resumed_from.endswith("checkpoint-1")
    assert rest.global_step == 3 and len(judge.batches) == 2 and not rest.stopped_by_time


def test_a_time_budget_is_minutes_of_this_process_and_zero_is_none() -> None:
    from types import SimpleNamespace

    from transformers import TrainerControl

    now = [100.0]
    limit = TimeLimit(60.0, clock=lambda: now[0])
    state = SimpleNamespace(global_step=1, max_steps=5)
    limit.on_train_begin(None, state, TrainerControl())
    now[0] = 159.0
    assert not limit.on_step_end(None, state, TrainerControl()).should_training_stop
    now[0], state.global_step = 160.0, 2
    control = limit.on_step_end(None, state, TrainerControl())
    assert control.should_training_stop and control.should_save and limit.stopped_at_step == 2
    last = TimeLimit(60.0, clock=lambda: now[0])  # the last step ends the run anyway: not a stop by time
    last.on_train_begin(None, state, TrainerControl())
    now[0], state.global_step = 1e6, 5
    assert not last.on_step_end(None, state, TrainerControl()).should_training_stop and last.stopped_at_step is None
    assert not TimeLimit(0.0).on_step_end(None, state, TrainerControl()).should_training_stop
    with pytest.raises(UsageError, match="max_minutes"):
        RLConfig(max_minutes=float("nan"))


def test_set_aside_items_are_judged_at_the_start_on_schedule_and_at_the_end_never_trained_on(
        data: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    judge = FakeJudge()
    cfg = config(data, tmp_path / "rl", tiny_model_dir, steps=3, eval_items=1, eval_steps=2, tracking_uri=uri)
    result = rl_command(cfg, judge=judge)
    kept, aside = set_aside(load_curriculum(data), cfg)
    assert [it.phase for it in aside] == ["infill", "whole"]
    aside_refs = {it.reference for it in aside}
    trained_refs = {it.reference for it in curriculum_items(kept, cfg)}
    assert not aside_refs & trained_refs and not {it.task_id for it in aside} & {
        it.task_id for it in kept.infill + kept.whole}
    judged = {p for batch in judge.batches for p, _ in batch}
    assert aside_refs & judged  # the set-aside prompts were judged ...
    assert result.completions == 3 * 4  # ... yet the run's counts are the training steps' alone
    client = MlflowClient(uri)
    history = client.get_metric_history(result.run_id or "", "eval_reward/total")
    assert [m.step for m in history] == [0, 2, 3]  # before the first step, at step 2, after the last (3)
    assert [m.step for m in client.get_metric_history(result.run_id or "", "reward/total")] == [1, 2, 3]
    run = client.get_run(result.run_id or "")
    assert "eval_rl/correct_rate" in run.data.metrics and run.data.params["rl.eval_items_in_all"] == "2"
    curves = client.download_artifacts(result.run_id or "", "rl_curves.json", str(tmp_path / "curves"))
    assert json.loads(Path(curves).read_text())["eval_at_steps"] == [0, 2, 3]


def test_an_evaluation_generates_as_many_completions_at_once_as_a_training_step(data: Path, tmp_path: Path) -> None:
    # a step: 2 micro-batches of 2 completions (one prompt's group each), generated by one call
    cfg = config(data, tmp_path / "rl", tmp_path / "model", eval_items=1, per_device_train_batch_size=2,
                 gradient_accumulation_steps=2)
    args = grpo_args(cfg, tmp_path / "rl", evaluate=True)
    assert args.per_device_eval_batch_size == 4 and args.steps_per_generation == 2


def test_setting_aside_more_items_than_a_phase_has_is_refused(data: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    cfg = config(data, tmp_path / "rl", tiny_model_dir, eval_items=3)  # 3 infill tasks and 3 pairs are kept
    with pytest.raises(UsageError, match="--eval-items 3: the infill phase has 3"):
        set_aside(load_curriculum(data), cfg)
    with pytest.raises(UsageError, match="eval_items"):
        config(data, tmp_path / "rl", tiny_model_dir, eval_items=-1)


def test_a_run_ended_by_its_time_budget_judges_the_set_aside_items_after_its_last_step(
        data: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = config(data, tmp_path / "rl", tiny_model_dir, steps=3, eval_items=1, eval_steps=2, max_minutes=1e-9,
                 tracking_uri=uri)
    result = rl_command(cfg, judge=FakeJudge())
    assert result.stopped_by_time and result.global_step == 1
    steps = [m.step for m in MlflowClient(uri).get_metric_history(result.run_id or "", "eval_reward/total")]
    assert steps == [0, 1]


def test_a_job_reads_its_curriculum_once(data: Path, tmp_path: Path, tiny_model_dir: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelwright.rl.stage as stage

    reads: list[Path] = []

    def counted(folder: Path) -> Any:
        reads.append(folder)
        return load_curriculum(folder)

    monkeypatch.setattr(stage, "load_curriculum", counted)
    cfg = config(data, tmp_path / "rl", tiny_model_dir, steps=1, infill_steps=1, eval_items=1,
                 tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    rl_command(cfg, judge=FakeJudge())
    assert reads == [data]


def test_rows_that_end_early_are_judged_while_the_others_generate(data: Path, tmp_path: Path, tiny_model_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """judge_while_generating through TRL's own generate call: the even rows end at their third token (forced
    here: a random tiny model seldom ends), go to the judge in batches of verify_jobs on the early judge's
    thread while the odd rows run to the budget, and the reward judges only those."""
    import threading

    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    from kernelwright.rl import stage

    class EvenRowsEnd(LogitsProcessor):
        def __init__(self, width: int, eos: int) -> None:
            self.width, self.eos = width, eos

        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
            if input_ids.shape[1] - self.width == 2:
                scores[::2] = float("-inf")
                scores[::2, self.eos] = 0.0
            return scores

    def ending_even_rows(model: Any, eos: int) -> None:
        generate = model.generate

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
            processors.append(EvenRowsEnd(int(kwargs["input_ids"].shape[1]), eos))
            return generate(*args, logits_processor=processors, **kwargs)

        model.generate = wrapped

    threads: list[str] = []

    class ThreadJudge(FakeJudge):
        def __call__(self, items: Sequence[JudgeItem]) -> list[Verdict]:
            threads.append(threading.current_thread().name)
            return super().__call__(items)

    monkeypatch.setattr(stage, "end_loops_with_eos", ending_even_rows)
    judge = ThreadJudge()
    result = run_rl(config(data, tmp_path / "rl", tiny_model_dir, verify_jobs=2), judge=judge)
    early = [b for b, t in zip(judge.batches, threads, strict=True) if t.startswith("kw-early-judge")]
    assert result.global_step == 2 and early and all(len(b) == 2 for b in early)
    pairs = [pair for batch in judge.batches for pair in batch]
    assert len(pairs) <= result.completions == 8
    assert len(set(pairs)) == len(pairs)  # what was judged early the reward took, and judged no candidate again
