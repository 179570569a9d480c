"""``multi.map``'s compiled calls: a repeat call of one shape reuses its setup (and still equals the
oracle on fresh data), another shape, dtype, device list, config or reduce compiles anew, and the
cache is bounded. Run on several oracle backends."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_multi import global_ids_program, histogram_program, oracles, u32, xor_program

import vyre
from vyre import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.lib import multi
from vyre.lib.multi_devices import each
from vyre.reference import run


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    multi.cache_clear()


@vyre.kernel(workgroup_size=64)
def saxpy(a: vyre.f32, x: vyre.In[vyre.f32], y: vyre.InOut[vyre.f32]):
    i = vyre.gid()
    if i < len(y):
        y[i] = a * x[i] + y[i]


def test_repeated_sharded_calls_hit_the_cache_and_equal_the_oracle(rng) -> None:
    program, n = global_ids_program(), 1025
    table, k = u32(rng, 37), np.array([7], np.uint32)
    for call in range(6):
        a, tag = u32(rng, n), u32(rng, n)
        sa, stag = multi.shard(a, oracles(3), align=32), multi.shard(tag, oracles(3), align=32)
        stats: dict = {}
        (out,) = multi.map(program, [sa, table, k, stag], stats=stats)
        assert stats["compiled"] == ("miss" if call == 0 else "hit")
        assert stats["path"] == "direct"
        assert np.array_equal(out.gather(), run(program, [a, table, k, tag])[0])
        assert np.array_equal(stag.gather(), tag)  # the read_write input is left as it was
    assert multi.cache_info() == {"hits": 5, "misses": 1, "size": 1, "max_size": multi.CACHE_SIZE}


def test_repeated_host_and_reduced_calls_hit_the_cache(rng) -> None:
    for call in range(4):
        a, b, data = u32(rng, 1000), u32(rng, 1000), u32(rng, 3000)
        stats: dict = {}
        (out,) = multi.map(xor_program(), [a, b], devices=oracles(3), stats=stats)
        assert np.array_equal(out, a ^ b) and stats["compiled"] == ("miss" if call == 0 else "hit")
        (bins,) = multi.map(histogram_program(), [multi.shard(data, oracles(2))], reduce={"bins": "add"},
                            config=DispatchConfig(elements=3000), stats=stats)
        assert np.array_equal(bins, np.bincount(data % 256, minlength=256).astype(np.uint32))
        assert stats["compiled"] == ("miss" if call == 0 else "hit") and stats["path"] == "resident"
    assert multi.cache_info()["misses"] == 2 and multi.cache_info()["hits"] == 6


def test_a_kernel_hits_the_cache_too(rng) -> None:
    for call in range(3):
        x, y = rng.random(700, np.float32), rng.random(700, np.float32)
        stats: dict = {}
        out = multi.map(saxpy, [np.float32(2.5), multi.shard(x, oracles(2)), multi.shard(y, oracles(2))],
                        stats=stats)
        assert stats["compiled"] == ("miss" if call == 0 else "hit")
        assert np.array_equal(out[0].gather(), run(saxpy.program, [np.float32(2.5), x, y])[0])


def test_another_shape_device_list_split_config_or_program_misses(rng) -> None:
    program, other = xor_program(), xor_program()
    a = u32(rng, 1000)
    base = [multi.shard(a, oracles(2)), multi.shard(a, oracles(2))]
    calls = [
        lambda: multi.map(program, base),
        lambda: multi.map(program, [multi.shard(a[:999], oracles(2))] * 2),  # another length
        lambda: multi.map(program, [multi.shard(a, oracles(3))] * 2),  # other devices
        lambda: multi.map(program, [multi.Sharded([a[:128], a[128:]], oracles(2))] * 2),  # another split
        lambda: multi.map(program, base, config=DispatchConfig(workgroup_override=(128, 1, 1))),
        lambda: multi.map(program, [a, a], devices=oracles(2)),  # host arrays
        lambda: multi.map(xor_program(wg=128), base),  # another program
    ]
    for k, call in enumerate(calls):
        (out,) = call()
        assert multi.cache_info()["misses"] == k + 1 and multi.cache_info()["hits"] == 0
    for call in calls:
        call()  # each again: all hits
    assert multi.cache_info()["hits"] == len(calls) and multi.cache_info()["size"] == len(calls)
    stats: dict = {}
    multi.map(other, base, stats=stats)  # an equal program built anew: found by its fingerprint
    assert stats["compiled"] == "hit" and multi.cache_info()["size"] == len(calls)


def test_a_refused_dtype_is_not_cached(rng) -> None:
    a = u32(rng, 256)
    good = multi.shard(a, oracles(2))
    multi.map(xor_program(), [good, good])
    bad = multi.Sharded([p.view(np.int32) for p in good.parts], oracles(2))
    program = xor_program()
    with pytest.raises(InvalidProgram, match="Fix:"):
        multi.map(program, [bad, good])
    with pytest.raises(InvalidProgram, match="Fix:"):  # refused again: the failure left nothing behind
        multi.map(program, [bad, good])
    assert multi.cache_info()["size"] == 1


def test_the_cache_is_bounded_least_recently_used_first(rng, monkeypatch) -> None:
    monkeypatch.setattr(multi, "CACHE_SIZE", 3)
    program = xor_program()
    sizes = [100, 200, 300, 400, 500]
    for n in sizes:
        multi.map(program, [u32(rng, n), u32(rng, n)], devices=oracles(2))
    multi.map(program, [u32(rng, 300), u32(rng, 300)], devices=oracles(2))  # 300 becomes the most recent
    multi.map(program, [u32(rng, 600), u32(rng, 600)], devices=oracles(2))  # drops 400, the oldest
    assert multi.cache_info()["size"] == 3
    stats: dict = {}
    for n, expect in ((300, "hit"), (500, "hit"), (600, "hit"), (400, "miss")):
        a, b = u32(rng, n), u32(rng, n)
        (out,) = multi.map(program, [a, b], devices=oracles(2), stats=stats)
        assert stats["compiled"] == expect, n
        assert np.array_equal(out, a ^ b)


def test_compile_gives_a_call_for_one_shape(rng) -> None:
    program = global_ids_program()
    table, k = u32(rng, 37), np.array([3], np.uint32)

    def inputs(n: int) -> tuple[list, list]:
        a, tag = u32(rng, n), u32(rng, n)
        sharded = [multi.shard(a, oracles(2), align=32), table, k, multi.shard(tag, oracles(2), align=32)]
        return [a, table, k, tag], sharded

    call = multi.compile(program, inputs(500)[1])
    assert isinstance(call, multi.CompiledMap)
    for _ in range(3):
        host, sharded = inputs(500)
        (out,) = call(sharded)
        assert np.array_equal(out.gather(), run(program, host)[0])
    with pytest.raises(InvalidProgram, match="Fix: call multi.compile again"):
        call(inputs(501)[1])


def test_each_reuses_its_threads_and_nests() -> None:
    names: set[str] = set()

    def record(item: int) -> int:
        names.add(threading.current_thread().name)
        return item * 2

    before = threading.active_count()
    for _ in range(20):
        assert each([1, 2, 3], record) == [2, 4, 6]
    assert threading.active_count() <= before + 3  # the shared pool's threads, not 3 new ones per call
    assert all(name.startswith("vyre-multi") for name in names)
    assert each([1, 2], lambda i: sum(each([i, i, i], lambda j: j))) == [3, 6]  # from the pool's own threads


def test_each_raises_the_first_failure_after_all_finished() -> None:
    done: list[int] = []

    def work(item: int) -> int:
        if item == 0:
            raise ValueError("device 0 failed")
        done.append(item)
        return item

    with pytest.raises(ValueError, match="device 0 failed"):
        each([0, 1, 2], work)
    assert sorted(done) == [1, 2]
