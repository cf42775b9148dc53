"""Infill format: the marker, the prompt, the splice of model text of any shape, and the task folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.errors import UsageError
from kernelwright.infill_format import (
    NO_ANSWER,
    REGION_KINDS,
    InfillTask,
    answer_text,
    category_kind,
    infill_category,
    infill_messages,
    load_infill,
    marker,
    marker_kind,
    splice,
    write_infill,
)
from kernelwright.prompting import SYSTEM_PROMPT, prompt_messages

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "kernelwright" / "seed" / "tasks" / "elementwise_leaky_relu"
SOLUTION = (SEED / "solution.py").read_text(encoding="utf-8")
REFERENCE = (SEED / "reference.py").read_text(encoding="utf-8")
HIDDEN = ("long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    long long stride = (long long)gridDim.x * blockDim.x;")
assert SOLUTION.count(HIDDEN) == 1
PARTIAL = SOLUTION.replace(HIDDEN, marker("index_guard"))


def test_the_marker_is_a_c_comment_naming_its_kind() -> None:
    for kind in REGION_KINDS:
        m = marker(kind)
        assert m.startswith("/*") and m.endswith("*/") and "*/" not in m[2:-2] and kind in m
        assert marker_kind(f"x\n    {m}\ny") == kind
    with pytest.raises(UsageError, match="unknown infill region kind"):
        marker("everything")
    with pytest.raises(UsageError, match="exactly one infill marker, not 2"):
        marker_kind(marker("index_guard") * 2)


def test_the_prompt_has_the_system_prompt_the_reference_and_the_partial() -> None:
    messages = infill_messages(REFERENCE, PARTIAL, "index_guard")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0] == prompt_messages(REFERENCE)[0] and messages[0]["content"] == SYSTEM_PROMPT
    user = messages[1]["content"]
    assert REFERENCE.strip() in user and PARTIAL.strip() in user and marker("index_guard") in user
    assert "only the missing code" in user and user.index(REFERENCE.strip()) < user.index(PARTIAL.strip())


def test_splicing_the_answer_back_gives_the_solution_byte_for_byte() -> None:
    assert splice(PARTIAL, answer_text(HIDDEN)) == SOLUTION
    assert answer_text(HIDDEN).startswith("```") and answer_text(HIDDEN).endswith("```")


@pytest.mark.parametrize("completion", [
    f"```cuda\n{HIDDEN}\n```",  # fenced, with a language tag
    f"```\n    {HIDDEN}\n```\n",  # fenced without one, indented as in the file
    f"Here is the code:\n```cpp\n{HIDDEN}\n```\nIt computes the index.",  # prose around the block
    f"\n{HIDDEN}\n\n",  # no fence at all: the raw text
    f"```python\n{HIDDEN}\n```\n```cuda\nint unused;\n```",  # the first block only
])
def test_splice_reads_the_code_of_completions_of_any_shape(completion: str) -> None:
    assert splice(PARTIAL, completion) == SOLUTION


@pytest.mark.parametrize("completion", ["", "   \n", "```cuda\n```", f"```\n{marker('index_guard')}\n```",
                                        f"int i = 0;\n{marker('launch_config')}"])
def test_an_empty_answer_or_one_holding_a_marker_leaves_a_file_that_cannot_build(completion: str) -> None:
    spliced = splice(PARTIAL, completion)
    assert spliced == PARTIAL.replace(marker("index_guard"), NO_ANSWER)
    assert "#error" in spliced and HIDDEN not in spliced and marker("index_guard") not in spliced


@pytest.mark.parametrize("completion", ["lorem ipsum }}}{", "```\n\"\"\"\n```", "\x00\udcff", "```cuda", "``````"])
def test_garbage_is_spliced_as_it_is_and_never_raises(completion: str) -> None:
    spliced = splice(PARTIAL, completion)
    assert spliced != SOLUTION and marker("index_guard") not in spliced
    assert spliced.startswith(SOLUTION[:SOLUTION.index(HIDDEN)])


def test_a_partial_without_exactly_one_marker_is_refused() -> None:
    with pytest.raises(UsageError, match="not 0"):
        splice(SOLUTION, HIDDEN)
    with pytest.raises(UsageError, match="not 2"):
        splice(PARTIAL + marker("launch_config"), HIDDEN)


def test_categories_name_the_kind() -> None:
    assert category_kind(infill_category("smem_tiling")) == "smem_tiling"
    assert category_kind("elementwise") is None


def _task(task_id: str = "elementwise_leaky_relu", kind: str = "index_guard") -> InfillTask:
    return InfillTask(id=f"{task_id}__{kind}", task_id=task_id, kind=kind, reference=REFERENCE, partial=PARTIAL,
                      answer=HIDDEN, signature="leaky_relu|", family="elementwise")


def test_a_task_folder_round_trips(tmp_path: Path) -> None:
    task = _task()
    crlf = InfillTask(**{**task.__dict__, "id": "crlf__index_guard", "task_id": "crlf",
                         "partial": PARTIAL.replace("\n", "\r\n")})
    paths = write_infill([task, crlf], tmp_path / "infill")
    assert [p.name for p in paths] == [task.id, crlf.id]
    assert sorted(f.name for f in paths[0].iterdir()) == ["answer.cu", "meta.json", "partial.py", "problem.py"]
    assert json.loads((paths[0] / "meta.json").read_text())["kind"] == "index_guard"
    assert load_infill(tmp_path / "infill") == [crlf, task]  # sorted by id, every byte kept
    assert not [p for p in (tmp_path / "infill").iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_malformed_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="infill folder not found"):
        load_infill(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no infill tasks"):
        load_infill(tmp_path / "empty")
    with pytest.raises(UsageError, match="not a plain file name"):
        write_infill([_task(task_id="../up")], tmp_path / "bad")
    with pytest.raises(UsageError, match="unique"):
        write_infill([_task(), _task()], tmp_path / "bad")
    (folder,) = write_infill([_task()], tmp_path / "wrong")
    (folder / "partial.py").write_text(SOLUTION)
    with pytest.raises(UsageError, match="exactly one infill marker"):
        load_infill(tmp_path / "wrong")
    (folder / "meta.json").write_text("{}")
    with pytest.raises(UsageError, match="not a task record"):
        load_infill(tmp_path / "wrong")
    (folder / "answer.cu").unlink()
    with pytest.raises(UsageError, match="lacks answer.cu"):
        load_infill(tmp_path / "wrong")
