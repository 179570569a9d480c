"""The programs of the scans and reductions: tile and segment reductions, the segmented scan's
downsweep, written as ``@vk.kernel`` functions (a cached factory per
monoid, whose ``Const`` parameters are the items per invocation and the params words), with the
``@vk.func`` pieces the single-pass scan (``lookback``) shares (``striped``, ``striped_value``);
``segment`` is the builder piece the segmented sort still uses.

Each program function is cached, so the same variant is the same ``Program``. Word numbers are
compile-time constants chosen by the topology (``vyre.lib._scan.topology``).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import Program
from vyre.ir.program import Access
from vyre.lib.blocks import (
    PARAM_WORDS,
    PARAMS,
    WARPS,
    WG,
    block_reduce,
    fold_warps_to,
    identity,
    warp_inclusive_scan_of,
    warp_reducer,
)
from vyre.lib.monoid import Monoid

SCAN_ITEMS = 8      # elements per invocation in the scans' downsweep (tile 2048)
REDUCE_ITEMS = 16   # elements per invocation in reductions and upsweeps (tile 4096)


@vk.func
def tile_element(items: Annotated[int, vk.Const[int]], k: Annotated[int, vk.Const[int]]):
    """Element ``k*WG + t`` of this workgroup's tile of ``WG*items`` elements (coalesced)."""
    return vk.wid() * (items * WG) + (k * WG + vk.lid())


@cache
def _reduce_tiles(m: Monoid) -> Kernel | KernelTemplate:
    """The tile reduction of ``m``; its Const parameters are the items per invocation and n's params word."""
    values, partials = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    warp_total = warp_reducer(m)

    @vk.kernel(workgroup_size=WG, name=f"lib_reduce_{m.op}_{m.dtype.value}")
    def reduce_tiles(x: Annotated[vk.In[vk.u32], values], partial: Annotated[vk.InOut[vk.u32], partials],
                     params: Annotated[vk.Uniform[vk.u32], PARAMS], items: vk.Const[int], n_word: vk.Const[int]):
        sums = vk.shared(m.element, WARPS)
        if vk.wid() * (items * WG) >= params[n_word]:
            return  # no element in this tile
        acc = identity(m)
        for k in range(items):
            acc = m.apply(acc, vk.select(tile_element(items, k) < params[n_word], x[tile_element(items, k)],
                                         identity(m)))
        total = block_reduce(acc, sums, m, warp_total)
        if vk.lid() == 0:
            partial[vk.wid()] = total

    return reduce_tiles


@cache
def reduce_tiles(m: Monoid, items: int, n_word: int) -> Program:
    """``partial[w] = x[w*T] op ... op x[w*T + T - 1]`` for each tile of ``T = WG*items`` elements."""
    return _reduce_tiles(m).bind(items, n_word).program


@vk.func
def segment_tiles(seg_base: Any, params: Any, n_word: Annotated[int, vk.Const[int]],
                  span_word: Annotated[int, vk.Const[int]], tile: Annotated[int, vk.Const[int]]):
    """``segment``'s ``seg_tiles``: the tiles of ``tile`` elements below ``n`` in the segment at ``seg_base``."""
    return (min(params[span_word], params[n_word] - seg_base) + (tile - 1)) // tile


@vk.func
def segment_element(tb: Any, k: Annotated[int, vk.Const[int]]):
    """Element ``k*WG + t`` of the tile at ``tb`` (coalesced)."""
    return tb + (k * WG + vk.lid())


@vk.func
def fold_segment(x: Any, extra: Any, params: Any, m: Any, value: Any, arg: Any, items: Annotated[int, vk.Const[int]],
                 n_word: Annotated[int, vk.Const[int]], span_word: Annotated[int, vk.Const[int]], seg_base: Any):
    """This invocation's fold with ``m`` of ``value(x, extra, params, tb, k, n_word, arg)`` (element
    ``tb + k*WG + t``) over every tile of its workgroup's segment, in order; the caller reduces
    it over the workgroup (``partial_of_segment``)."""
    return fold_tiles(x, extra, params, m, value, arg, items, n_word, seg_base,
                      segment_tiles(seg_base, params, n_word, span_word, items * WG))


@vk.func
def fold_tiles(x: Any, extra: Any, params: Any, m: Any, value: Any, arg: Any, items: Annotated[int, vk.Const[int]],
               n_word: Annotated[int, vk.Const[int]], seg_base: Any, tiles: Any):
    """``fold_segment`` over the first ``tiles`` tiles of the segment at ``seg_base``."""
    acc = identity(m)
    for t in range(tiles):
        tb = seg_base + t * (items * WG)
        for k in range(items):
            acc = m.apply(acc, value(x, extra, params, tb, k, n_word, arg))
    return acc


@vk.func
def padded(x: Any, extra: Any, params: Any, tb: Any, k: Annotated[int, vk.Const[int]],
           n_word: Annotated[int, vk.Const[int]], m: Any):
    """``fold_segment``'s value of a reduction: the element, or ``m``'s pad past ``n``."""
    return vk.select(segment_element(tb, k) < params[n_word], x[segment_element(tb, k)], identity(m))


@vk.func
def partial_of_segment(acc: Any, partial: Any, sums: Any, m: Any, warp_total: Any):
    """``partial[w]`` = ``acc`` combined over the workgroup."""
    total = block_reduce(acc, sums, m, warp_total)
    if vk.lid() == 0:
        partial[vk.wid()] = total


@cache
def _reduce_segments(m: Monoid) -> Kernel | KernelTemplate:
    """The segment reduction of ``m``; its Const parameters: items per invocation, n's and span's params words."""
    values, partials = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    warp_total = warp_reducer(m)

    @vk.kernel(workgroup_size=WG, name=f"lib_reduce_segments_{m.op}_{m.dtype.value}")
    def reduce_segments(x: Annotated[vk.In[vk.u32], values], partial: Annotated[vk.InOut[vk.u32], partials],
                        params: Annotated[vk.Uniform[vk.u32], PARAMS], items: vk.Const[int], n_word: vk.Const[int],
                        span_word: vk.Const[int]):
        sums = vk.shared(m.element, WARPS)
        seg_base = vk.wid() * params[span_word]  # workgroup w owns elements w*span ... w*span + span - 1
        if seg_base >= params[n_word]:
            return
        acc = fold_segment(x, x, params, m, padded, m, items, n_word, span_word, seg_base)
        partial_of_segment(acc, partial, sums, m, warp_total)

    return reduce_segments


@cache
def reduce_segments(m: Monoid, items: int, n_word: int, span_word: int) -> Program:
    """``partial[w]`` = the combination of workgroup ``w``'s segment (the scans' upsweep)."""
    return _reduce_segments(m).bind(items, n_word, span_word).program


@vk.func
def striped(base: Any, offset: Annotated[int, vk.Const[int]], k: Annotated[int, vk.Const[int]],
            items: Annotated[int, vk.Const[int]]):
    """Element ``k`` of this invocation in the tile at ``base + offset``: warp ``v`` owns the
    ``32*items`` consecutive elements from ``v*32*items``, round ``k`` its 32 elements from ``k*32``."""
    return (base + offset if offset != 0 else base) + (
        (vk.lid() >> 5) * (32 * items) + (k * 32 + vk.subgroup_local_id()))


@vk.func
def striped_value(x: Any, params: Any, n_word: Annotated[int, vk.Const[int]], m: Any, base: Any,
                  offset: Annotated[int, vk.Const[int]], k: Annotated[int, vk.Const[int]],
                  items: Annotated[int, vk.Const[int]]):
    """``x`` at ``striped(...)``, or ``m``'s pad past ``n``."""
    return vk.select(striped(base, offset, k, items) < params[n_word], x[striped(base, offset, k, items)], identity(m))


def init_spec(m: Monoid, has_init: bool, init_bound: bool) -> BufferSpec | None:
    """The ``init`` parameter of a scan kernel: none, a typed view of the parameter words (a host
    ``init``; the kernel reads its ``init_word``), or with ``init_bound`` a bound buffer of ``m``'s
    type (a caller's 1-element device array; ``init_word`` is 0)."""
    if not has_init:
        return None
    if init_bound:
        return BufferSpec(Access.READ, m.dtype)
    return BufferSpec(Access.UNIFORM, m.dtype, PARAM_WORDS * 4 // m.dtype.size)


@cache
def _scan_segments(m: Monoid, inclusive: bool, has_carry: bool, has_init: bool,
                   init_bound: bool = False) -> Kernel | KernelTemplate:
    """The segment scan of ``m``; its Const parameters: ``inclusive``, ``has_carry``, ``has_init``,
    items per invocation, the params words of n and span, and the ``init`` word (``init_spec``)."""
    values, outs = BufferSpec(Access.READ, m.dtype), BufferSpec(Access.READ_WRITE, m.dtype)
    carries = BufferSpec(Access.READ, m.dtype) if has_carry else None
    inits = init_spec(m, has_init, init_bound)
    kind = "inclusive" if inclusive else "exclusive"
    suffix = "_init_buffer" if init_bound else ""

    @vk.kernel(workgroup_size=WG, name=f"lib_scan_{kind}_{m.op}_{m.dtype.value}{suffix}")
    def scan(x: Annotated[vk.In[vk.u32], values], out: Annotated[vk.InOut[vk.u32], outs],
             carry: Annotated[vk.In[vk.u32], carries], params: Annotated[vk.Uniform[vk.u32], PARAMS],
             init: Annotated[vk.Uniform[vk.u32], inits], inclusive: vk.Const[bool], has_carry: vk.Const[bool],
             has_init: vk.Const[bool], items: vk.Const[int], n_word: vk.Const[int], span_word: vk.Const[int],
             init_word: vk.Const[int]):
        sums = vk.shared(m.element, 2 * WARPS)  # the warp totals, in two halves by tile parity
        seg_base = vk.wid() * params[span_word]
        if seg_base >= params[n_word]:
            return
        seg_tiles = segment_tiles(seg_base, params, n_word, span_word, items * WG)
        if has_init:
            carry_in = m.apply(init[init_word], carry[vk.wid()] if has_carry else identity(m))
        else:
            carry_in = carry[vk.wid()] if has_carry else identity(m)
        nxt = vk.registers(m.element, items)  # the next tile's elements, loaded while this one is scanned
        v = vk.registers(m.element, items)
        r = vk.registers(m.element, items)  # round k's inclusive result in the warp, exclusive one, warp total
        e = vk.registers(m.element, items)
        h = vk.registers(m.element, items)
        w = vk.registers(m.element, 2)
        for k in range(items):
            nxt[k] = striped_value(x, params, n_word, m, seg_base, 0, k, items)
        for t in range(seg_tiles):
            tb = seg_base + t * (items * WG)
            par = (t & 1) * WARPS
            for k in range(items):
                v[k] = nxt[k]
            for k in range(items):
                nxt[k] = striped_value(x, params, n_word, m, tb, items * WG, k, items)
            for k in range(items):  # each warp scans its 32*items elements round by round
                scanned = warp_inclusive_scan_of(v[k], m)
                r[k] = m.apply(h[k - 1], scanned) if k != 0 else scanned
                if not inclusive:
                    e[k] = vk.select(vk.subgroup_local_id() == 0, h[k - 1] if k != 0 else identity(m),
                                     vk.subgroup_shuffle(r[k], vk.subgroup_local_id() - 1))
                h[k] = vk.subgroup_shuffle(r[k], 31)
            if vk.subgroup_local_id() == 0:
                sums[par + (vk.lid() >> 5)] = h[items - 1]
            vk.barrier()
            fold_warps_to(w, sums, m, par, WARPS)
            wbase = m.apply(carry_in, w[0])
            for k in range(items):
                if striped(tb, 0, k, items) < params[n_word]:
                    out[striped(tb, 0, k, items)] = m.apply(wbase, r[k] if inclusive else e[k])
            carry_in = m.apply(carry_in, w[1])

    return scan


@cache
def scan_segments(m: Monoid, items: int, inclusive: bool, has_carry: bool, n_word: int, span_word: int,
                  init_word: int | None, init_bound: bool = False) -> Program:
    """Scan workgroup ``w``'s segment of ``x`` into ``out``, starting from ``init op carry[w]`` (the downsweep).

    The workgroup walks its tiles in order with a running carry. Each warp owns a contiguous
    stretch of the tile and scans it round by round; one barrier passes the warp totals through
    workgroup memory (two halves by tile parity, so the next tile needs no second barrier). The
    next tile's loads are issued before the current tile is scanned, so they are in flight while
    it is scanned and written. ``init``: element ``init_word`` of the parameter words (a host
    value), or with ``init_bound`` element 0 of a bound buffer (a caller's device array).
    """
    kernel = _scan_segments(m, inclusive, has_carry, init_word is not None, init_bound)
    return kernel.bind(inclusive, has_carry, init_word is not None, items, n_word, span_word, init_word or 0).program
