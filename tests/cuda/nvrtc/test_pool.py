"""The NVRTC pool: worker processes started on demand, reused, and replaced when a limit stops one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelwright.cuda.nvrtc.device import device_options
from kernelwright.cuda.nvrtc.pool import NvrtcPool, nvrtc_pool
from kernelwright.cuda.nvrtc.program import nvrtc_version

pytestmark = pytest.mark.skipif(nvrtc_version() is None, reason="NVRTC does not load here")
KERNEL = "__global__ void k{i}(float* x) {{ x[threadIdx.x] = {i}.0f; }}"
# template recursion NVRTC takes far longer than a second to instantiate
RUNAWAY = """
template <int D, long I> struct KwTree {
    static constexpr long v = KwTree<D - 1, 2 * I>::v + KwTree<D - 1, 2 * I + 1>::v;
};
template <long I> struct KwTree<0, I> { static constexpr long v = I; };
__global__ void k(long* o) { *o = KwTree<24, 0>::v; }
"""


@pytest.fixture
def pool() -> Iterator[NvrtcPool]:
    made = NvrtcPool(2, 4096)
    yield made
    made.close()


def test_replies_come_in_order_from_at_most_size_workers(pool: NvrtcPool) -> None:
    sources = [KERNEL.format(i=i) for i in range(6)] + ["__global__ void broken( {"]
    replies = pool.compile_each(sources, "kw.cu", device_options(), 60)
    assert [r["status"] for r in replies] == ["ok"] * 6 + ["failed"]
    assert all(r["ptx_bytes"] > 0 for r in replies[:6]) and "kw.cu" in replies[-1]["log"]
    assert len(pool._all) <= 2


def test_a_compile_past_its_time_limit_is_stopped_and_its_worker_replaced(pool: NvrtcPool) -> None:
    stopped = pool.compile(RUNAWAY, "kw.cu", device_options(), 1)
    assert stopped["status"] == "failed" and stopped["limit"] in ("timeout", "cpu_limit")
    assert pool.compile(KERNEL.format(i=1), "kw.cu", device_options(), 60)["status"] == "ok"


def test_one_pool_per_size_and_memory_limit() -> None:
    assert nvrtc_pool(3, 1024) is nvrtc_pool(3, 1024)
    assert nvrtc_pool(3, 1024) is not nvrtc_pool(3, 2048)
