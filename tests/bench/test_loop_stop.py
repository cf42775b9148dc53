"""bench/loop_stop.py: where generation's loop stop would first fire on a token sequence."""

from bench.loop_stop import category_of, first_stop
from kernelwright.generation import ends_in_loop


def test_first_stop_is_where_the_window_first_repeats_one_unit() -> None:
    honest = [i % 251 for i in range(2000)]  # a unit of 251 tokens: longer than any looked for
    assert first_stop(honest, 256, 64) is None
    loop_from = 300
    ids = list(range(loop_from)) + [1, 2, 3] * 200
    at = first_stop(ids, 256, 64)
    assert at is not None and ends_in_loop(ids[:at], 256, 64) and not ends_in_loop(ids[:at - 1], 256, 64)
    assert first_stop([1, 2] * 100, 256, 64) is None  # shorter than the window


def test_category_of_a_synthesized_answer_and_of_the_rest() -> None:
    assert category_of("W/synthesize/train/matmul_epilogue_00147/solution.py") == "matmul_epilogue"
    assert category_of("kernelwright/seed/tasks/softmax_online/solution.py") == "seed"
