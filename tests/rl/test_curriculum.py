"""The curriculum: infill first, then whole problems; no held-out item in any training phase."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.errors import UsageError
from kernelwright.rl.config import RLConfig
from kernelwright.rl.curriculum import (
    INFILL,
    WHOLE,
    RLItem,
    curriculum_items,
    held_out,
    load_curriculum,
    rows,
    set_aside,
)
from kernelwright.seed import load_seed_tasks, split_tasks
from tests.rl._data import KEPT, make_data


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_data(tmp_path_factory.mktemp("rl-data"))


def test_no_held_out_item_is_ever_trained_on(data: Path) -> None:
    c = load_curriculum(data)
    _, seed_test = split_tasks(load_seed_tasks())
    assert sorted(it.id for it in c.whole) == sorted(KEPT)
    assert sorted(it.task_id for it in c.infill) == sorted(KEPT)
    assert c.dropped == {
        "elementwise_elu": "signature elu|",  # the held-out problem's SIGNATURE
        "elementwise_elu__index_guard": "signature elu|",
        "synth_renamed_seed": "seed held-out reference",  # a held-out seed task under another id
        seed_test[1].id: f"id {seed_test[1].id}",  # a held-out seed task's id
        "synth_sincos": "signature sincos|",  # a held-out infill task's signature (and task id)
        "synth_lerp__index_guard": "signature lerp|",
        "synth_manifest": "signature from_manifest|",  # the manifest's held-out list
        "synth_solution_signature": "signature sincos_sol|",  # a held-out solution's meta
    }
    banned = held_out(data)
    for item in c.whole + c.infill:
        assert item.signature not in banned.signatures
        assert item.id not in banned.ids and item.task_id not in banned.ids
    assert {t.id for t in seed_test} <= banned.ids


def test_phase_one_is_infill_then_whole_problems_with_the_steps_of_the_config(data: Path) -> None:
    cfg = RLConfig(data=str(data), steps=5, infill_steps=2, num_generations=2, per_device_train_batch_size=4)
    items = curriculum_items(load_curriculum(data), cfg)
    assert cfg.prompts_per_step == 2 and len(items) == 10
    assert [it.phase for it in items] == [INFILL] * 4 + [WHOLE] * 6
    assert {it.id for it in items[4:]} == set(KEPT)  # a whole pass before any repeats
    longer = curriculum_items(load_curriculum(data), RLConfig(data=str(data), steps=7, infill_steps=2,
                                                              num_generations=2, per_device_train_batch_size=4))
    assert longer[:10] == items  # more steps keep the order of the steps before (a resumed run continues)
    first = rows(items[:1])[0]
    assert first["phase"] == INFILL and "FILL IN: index_guard" in first["prompt"][-1]["content"]
    assert rows(items[4:5])[0]["prompt"][-1]["content"].startswith("Write ModelNew")


def test_a_phase_without_items_is_refused(data: Path, tmp_path: Path) -> None:
    only_whole = tmp_path / "synth"
    (only_whole / "train").mkdir(parents=True)
    for name in ("reference.py", "meta.json"):
        (only_whole / "train" / "a").mkdir(exist_ok=True)
        (only_whole / "train" / "a" / name).write_text((data / "train" / KEPT[0] / name).read_text())
    with pytest.raises(UsageError, match="--infill-steps 0"):
        curriculum_items(load_curriculum(only_whole), RLConfig(data=str(only_whole), steps=4))
    assert len(curriculum_items(load_curriculum(only_whole), RLConfig(steps=4, infill_steps=0))) == 4 * 1
    with pytest.raises(UsageError, match="no synthesized data"):
        load_curriculum(tmp_path / "missing")


def test_a_pool_of_items_per_phase_recurs_and_a_longer_run_keeps_it(data: Path) -> None:
    """A short run's reward follows the same prompts when each phase cycles through a small pool."""
    def items(steps: int, size: int | None) -> list[RLItem]:
        return curriculum_items(load_curriculum(data), RLConfig(
            data=str(data), steps=steps, infill_steps=0, num_generations=2, per_device_train_batch_size=2,
            items_per_phase=size))

    pooled = items(8, 2)
    assert len({it.id for it in pooled}) == 2 and len(pooled) == 8  # 2 of the kept problems, 4 times each
    assert {it.id for it in pooled} <= set(KEPT)
    assert items(12, 2)[:8] == pooled  # the pool and the order do not depend on the run's length
    assert {it.id for it in items(8, None)} == set(KEPT) == {it.id for it in items(8, 99)}
    with pytest.raises(UsageError, match="items_per_phase"):
        RLConfig(items_per_phase=0)


def test_phase_one_draws_only_the_infill_kinds_asked_for(data: Path) -> None:
    def config(kinds: list[str]) -> RLConfig:
        return RLConfig(data=str(data), steps=4, infill_steps=4, num_generations=2, per_device_train_batch_size=2,
                        infill_kinds=kinds)

    every = curriculum_items(load_curriculum(data), config([]))
    assert {it.kind for it in every} == {"index_guard"}  # the test data's only kind
    assert curriculum_items(load_curriculum(data), config(["index_guard", "reduction_loop"])) == every
    with pytest.raises(UsageError, match="no infill training tasks of kind smem_tiling"):
        curriculum_items(load_curriculum(data), config(["smem_tiling"]))
    with pytest.raises(UsageError, match="unknown region kind.* guard; the kinds are index_guard"):
        RLConfig(infill_kinds=["guard"])


def test_set_aside_items_are_the_same_for_every_seed_and_no_pool_holds_their_tasks(data: Path) -> None:
    def split(seed: int, items_per_phase: int | None = None) -> tuple[list[RLItem], list[RLItem]]:
        cfg = RLConfig(data=str(data), steps=4, infill_steps=2, num_generations=2, per_device_train_batch_size=2,
                       eval_items=1, seed=seed, items_per_phase=items_per_phase)
        kept, aside = set_aside(load_curriculum(data), cfg)
        return curriculum_items(kept, cfg), aside

    trained, aside = split(0)
    assert [it.phase for it in aside] == [INFILL, WHOLE]
    assert [it.id for it in split(7)[1]] == [it.id for it in aside]  # seeds compare on one set
    for seed in (0, 7):
        pooled = split(seed, items_per_phase=1)[0]
        assert not {it.task_id for it in pooled + trained} & {it.task_id for it in aside}
    infill_only = set_aside(load_curriculum(data), RLConfig(steps=2, infill_steps=2, eval_items=1))[1]
    assert [it.phase for it in infill_only] == [INFILL]  # a phase without steps sets nothing aside
    assert set_aside(load_curriculum(data), RLConfig())[1] == []  # 0: no evaluation
