"""The programs of the single-pass radix sort (Onesweep): digit histograms of all passes, digit
starts, and one pass per kernel with decoupled look-back over tiles."""

from __future__ import annotations

import math
from functools import cache
from typing import Annotated, Any

from vyre.frontend import lang as vk
from vyre.frontend.annotations import TYPE_NAMES, BufferSpec
from vyre.frontend.kernel import Kernel
from vyre.frontend.template import KernelTemplate
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.program import Access
from vyre.lib._histogram.kernels import merge_bins
from vyre.lib._sort import registers as registers_tile
from vyre.lib._sort.kernels import SORT_ITEMS
from vyre.lib._sort.tiles import (
    RADIX,
    RADIX_BITS,
    RADIX_PASSES,
    digit,
    digit_of,
    radix_buffers,
    radix_passes,
    radix_tiles,
    sort_key,
    tile_bits,
)
from vyre.lib.blocks import (
    PARAMS,
    U32,
    WARPS,
    WG,
    WG_SIZE,
    bounded_wait,
    exclusive_block_scan,
    lid,
    load_param,
    u,
    var,
)
from vyre.lib.keys import key_bits, key_kind, key_of, raw_type
from vyre.lib.monoid import COUNT

# The ``lookback`` buffer: words 0-3 count the tiles taken in each pass, words LOOKBACK_STARTS +
# 256*p + d hold the digit counts of pass p (then, scanned, digit d's first output slot), and from
# LOOKBACK_HEAD come two regions of 256 words per tile (``params`` word ``region_word``: their
# size), used by the passes alternately. ``status[0]`` counts the digits whose look-back gave up.
# 64-bit keys take eight passes: the same layout with eight counters and eight passes' starts
# (``lookback_starts``, ``lookback_head``).
LOOKBACK_STARTS = RADIX_PASSES
LOOKBACK_HEAD = LOOKBACK_STARTS + RADIX_PASSES * (1 << RADIX_BITS)
FLAG_A = 1 << 30    # a tile's own count of the digit (an aggregate)
FLAG_P = 1 << 31    # the count of the digit in this and every lower tile (an inclusive prefix)
SPIN = (6, 16)      # the look-back's wait: 6 nested loops of 16 trips, at most 16**6 trips
LOOKBACK_WIDTH = 2  # tiles whose words one look-back trip reads together (1 measured the same, 3, 4, 8 slower)
ONESWEEP_ITEMS = SORT_ITEMS
ONESWEEP_VALUE_ITEMS = 16  # with values (tile 4096; 47 KB of workgroup memory, 4 workgroups per SM on an H100)
ONESWEEP_WIDE_ITEMS = 16  # 64-bit keys alone (tile 4096; 46 KB of workgroup memory)
ONESWEEP_WIDE_VALUE_ITEMS = 8  # 64-bit keys with values or indices (tile 2048; 34 KB, 42 KB with 8-byte values)
HISTOGRAM_ITEMS = 8  # keys per invocation and round of the digit histograms (all loaded first)
ONESWEEP_KEYS_IN_REGISTERS = True  # a pass reads each key once, into registers (``registers``), not three times
ONESWEEP_REGISTER_ROUNDS = 4  # keys in registers: keys ranked (and placed) per loop iteration (its gcd with the
# items; 0: all, written out: 16 keys of 64 bits take 64-72 registers, 24 of 32 bits pass 4096 PTX instructions)
ONESWEEP_RANKS_IN_REGISTERS = False  # keys in registers: the ranks too, not in the ``ranks`` workgroup buffer
# (measured with ptxas: 56-96 registers at 16 keys per invocation, so 3 or fewer workgroups per SM)


def lookback_starts(passes: int) -> int:
    """The first word of the digit counts (then starts) in the ``lookback`` buffer of ``passes`` passes."""
    return passes


def lookback_head(passes: int) -> int:
    """The first word of the look-back regions in the ``lookback`` buffer of ``passes`` passes."""
    return lookback_starts(passes) + passes * (1 << RADIX_BITS)


def onesweep_items(raw: DataType, values: str) -> int:
    """Keys per invocation of a single-pass radix tile, by key bits and ``values`` mode."""
    if raw is U32:
        return ONESWEEP_ITEMS if values == "none" else ONESWEEP_VALUE_ITEMS
    return ONESWEEP_WIDE_ITEMS if values == "none" else ONESWEEP_WIDE_VALUE_ITEMS


@vk.func
def count_digits(local: Any, key: Any, passes: Annotated[int, vk.Const[int]], wide: Annotated[bool, vk.Const[bool]]):
    """Count the digit of ``key`` of each of ``passes`` passes in ``local[256*p + digit]`` (a workgroup atomic each)."""
    for p in range(passes):
        vk.atomic_add_relaxed(local, p * RADIX + digit(key, p * RADIX_BITS, wide), 1)


@cache
def _radix_histograms(key_type: DataType) -> Kernel | KernelTemplate:
    """``radix_histograms`` of ``key_type``; its Const parameters: items per invocation, the params
    words of n and of the workgroup count."""
    raw = raw_type(key_type)
    keys_spec, bits, wide = BufferSpec(Access.READ, raw), TYPE_NAMES[raw], raw is not U32
    passes, kind, b = radix_passes(raw), key_kind(key_type), key_bits(key_type)
    starts = lookback_starts(passes)

    @vk.kernel(workgroup_size=WG, name=f"lib_radix_histograms_{key_type.value}")
    def histograms(keys: Annotated[vk.In[vk.u32], keys_spec], lookback: vk.InOut[vk.u32],
                   params: Annotated[vk.Uniform[vk.u32], PARAMS], items: vk.Const[int], n_word: vk.Const[int],
                   blocks_word: vk.Const[int]):
        local = vk.shared(vk.u32, passes * RADIX)
        i = vk.registers(vk.u32, items)
        key = vk.registers(bits, items)
        for r in range((params[n_word] + (params[blocks_word] * (WG * items) - 1))
                       // (params[blocks_word] * (WG * items))):
            tb = (r * params[blocks_word] + vk.wid()) * (WG * items)
            for k in range(items):  # all loaded before any is counted
                i[k] = tb + (k * WG + vk.lid())
                key[k] = key_of(keys[i[k]], kind, b)
            if tb < params[n_word] - min(params[n_word], WG * items - 1):  # tb + tile <= n, without overflow
                for k in range(items):
                    count_digits(local, key[k], passes, wide)
            else:
                for k in range(items):
                    if i[k] < params[n_word]:
                        count_digits(local, key[k], passes, wide)
        vk.barrier()
        merge_bins(lookback, local, params, starts, passes * RADIX, 0, vk.u32)

    return histograms


@cache
def radix_histograms(key_type: DataType, items: int, n_word: int, blocks_word: int) -> Program:
    """The digit counts of all passes at once, into ``lookback[starts + 256*p + d]`` (zeroed;
    ``starts`` is ``lookback_starts`` of the passes of ``key_type``: four, or eight for 64-bit keys).

    Workgroup ``w`` of ``B`` (params ``blocks_word``) takes tiles ``w, w + B, ...`` of ``WG * items``
    keys (coalesced, all loaded before they are counted) and counts each key's digits in workgroup
    memory with workgroup atomics, then merges with one global atomic per non-zero bin. A tile
    wholly below ``n`` counts its keys without a test per key.
    """
    return _radix_histograms(key_type).bind(items, n_word, blocks_word).program


@cache
def _radix_digit_starts(passes: int) -> Kernel:
    """``radix_digit_starts`` of ``passes`` passes."""
    suffix = "" if passes == RADIX_PASSES else f"_{passes}"
    starts = lookback_starts(passes)

    @vk.kernel(workgroup_size=WG, name=f"lib_radix_digit_starts{suffix}")
    def digit_starts(lookback: vk.InOut[vk.u32]):
        sums = vk.shared(vk.u32, WARPS)
        w = vk.registers(vk.u32, 2)
        at = starts + (vk.wid() * RADIX + vk.lid())
        count = lookback[at]
        lookback[at] = exclusive_block_scan(count, sums, w, COUNT)

    return digit_starts


@cache
def radix_digit_starts(passes: int = RADIX_PASSES) -> Program:
    """Workgroup ``p`` scans pass ``p``'s digit counts in place (exclusive): each digit's first
    output slot (one workgroup per pass, of ``passes``)."""
    return _radix_digit_starts(passes).program


EARLY_BATCH = 4  # keys loaded together by the early digit counts


def _early_counts(key_in: DataType | None, shift: int, items: int, raw: DataType = U32) -> list[Node]:
    """The tile's count of each digit before it is ranked, binding ``own`` (invocation ``t``: the
    count of digit ``t``): its keys below ``limit`` are read (coalesced, ``EARLY_BATCH`` in flight)
    and counted with relaxed workgroup atomics into ``hist`` (without a test per key in a whole
    tile). Publishing these counts first, not after the long ranking step, is what keeps later
    tiles' look-backs from waiting. ``EARLY_BATCH`` must divide ``items``: a whole tile's batches
    are not tested against ``limit``, so a last batch past the tile would count the next tile's keys."""
    if items % EARLY_BATCH:
        raise ValueError(f"a single-pass radix tile's items ({items}) must be a multiple of EARLY_BATCH "
                         f"({EARLY_BATCH}), or its early counts would count keys of the next tile")

    def index(k: int) -> Expr:
        key = Expr.add(Expr.mul(var("eb"), u(EARLY_BATCH)), u(k))
        return Expr.add(var("seg_base"), Expr.add(Expr.mul(key, u(WG)), lid()))

    def counted(k: int) -> Node:
        return Node.let(f"eo{k}", Expr.atomic(AtomicOp.ADD, "hist", digits[k], u(1), relaxed=True))

    # n = limit: none past it counts
    batch = tile_bits(key_in, EARLY_BATCH, var("limit"), var("limit"), "e", index, var("whole"), raw=raw)
    digits = [digit_of(sort_key(key_in, var(f"e{k}")), shift, raw) for k in range(EARLY_BATCH)]
    batch.append(Node.if_(var("whole"), [counted(k) for k in range(EARLY_BATCH)],
                          [Node.if_(Expr.lt(index(k), var("limit")), counted(k)) for k in range(EARLY_BATCH)]))
    return [Node.loop("eb", u(0), u(items // EARLY_BATCH), batch), Node.barrier(),
            Node.let("own", Expr.load("hist", lid()))]


def _register_counts(key_in: DataType | None, shift: int, items: int, raw: DataType = U32) -> list[Node]:
    """``_early_counts`` from the keys in registers: load the tile's keys once (``registers_tile.load_keys``)
    and count every key's digit, binding ``own``. Keys past ``n`` (the all-ones key) are counted as
    digit 255 and taken off that count (``tile - valid`` of them), so no key is tested."""
    radix = 1 << RADIX_BITS
    past = Expr.select(Expr.eq(lid(), u(radix - 1)), Expr.sub(u(WG * items), var("valid")), u(0))
    counted = [Node.let(f"eo{j}", Expr.atomic(AtomicOp.ADD, "hist", digit, u(1), relaxed=True))
               for j, digit in enumerate(registers_tile.key_digits(shift, items, raw))]
    return [*registers_tile.load_keys(key_in, items, raw), *counted, Node.barrier(),
            Node.let("own", Expr.sub(Expr.load("hist", lid()), past))]


def _lookback_word(t: Expr) -> Expr:
    """Digit ``lid()``'s word of tile ``t`` in this pass's region (``region`` bound by ``_publish``)."""
    return Expr.add(var("region"), Expr.add(Expr.mul(t, u(1 << RADIX_BITS)), lid()))


def _publish(pass_: int, region_word: int, head: int = LOOKBACK_HEAD) -> list[Node]:
    """Invocation ``t`` publishes the tile's count of digit ``t`` (``own``): ``own | FLAG_A``, or
    ``own | FLAG_P`` for tile 0, whose count is already an inclusive prefix."""
    flag = Expr.select(Expr.eq(var("tile"), u(0)), u(FLAG_P), u(FLAG_A))
    return [Node.let("region", Expr.add(u(head), Expr.mul(u(pass_ % 2), load_param(region_word)))),
            Node.let("aggregate", Expr.atomic(AtomicOp.EXCHANGE, "lookback", _lookback_word(var("tile")),
                                              Expr.bitor(var("own"), flag), relaxed=True))]


def _look_back(pass_: int, spin: tuple[int, int], width: int, starts: int = LOOKBACK_STARTS) -> list[Node]:
    """Invocation ``t``'s look-back for digit ``t`` (the ``lookback`` nodes of ``tiles.digit_slots``),
    after ``_publish``: binds ``run``. ``word`` is digit ``t``'s word of the nearest tile not yet
    taken; each trip reads it and the words of the ``width - 1`` tiles below at once (one memory
    latency, not ``width``) and takes them nearest first, up to the first one not yet published
    (read again next trip) or holding an inclusive prefix (done). Near tile 0 a trip also reads
    words below tile 0's (inside the buffer's head): never taken, since tile 0 holds ``FLAG_P``."""
    first = Expr.eq(var("tile"), u(0))
    radix = 1 << RADIX_BITS
    step: list[Node] = [Node.let("go", Expr.bool(True)), Node.let("at", var("word"))]
    for k in range(width):
        step.append(Node.let(f"seen{k}", Expr.atomic(AtomicOp.OR, "lookback", Expr.sub(var("at"), u(k * radix)),
                                                     u(0), relaxed=True)))  # an atomic read
    for k in range(width):
        seen = var(f"seen{k}")
        step += [Node.let(f"took{k}", Expr.and_(var("go"), Expr.ne(Expr.bitand(seen, u(FLAG_A | FLAG_P)), u(0)))),
                 Node.let(f"last{k}", Expr.ne(Expr.bitand(seen, u(FLAG_P)), u(0))),
                 Node.assign("prefix", Expr.add(var("prefix"), Expr.select(var(f"took{k}"),
                                                                           Expr.bitand(seen, u(FLAG_A - 1)), u(0)))),
                 Node.assign("word", Expr.select(var(f"took{k}"), Expr.sub(var("word"), u(radix)), var("word"))),
                 Node.assign("done", Expr.or_(var("done"), Expr.and_(var(f"took{k}"), var(f"last{k}")))),
                 Node.assign("go", Expr.and_(var(f"took{k}"), Expr.not_(var(f"last{k}"))))]
    inclusive = Expr.bitor(Expr.add(var("prefix"), var("own")), u(FLAG_P))
    start = Expr.load("lookback", Expr.add(u(starts + pass_ * (1 << RADIX_BITS)), lid()))
    return [Node.let("done", first), Node.let("prefix", u(0)),
            Node.let("word", Expr.sub(_lookback_word(var("tile")), u(radix))),
            bounded_wait("done", *spin, step, "spin"),
            Node.if_(var("done"),
                     Node.if_(Expr.not_(first), Node.let("published", Expr.atomic(AtomicOp.EXCHANGE, "lookback",
                                                                                   _lookback_word(var("tile")),
                                                                                   inclusive, relaxed=True))),
                     Node.let("gave_up", Expr.atomic(AtomicOp.ADD, "status", u(0), u(1), relaxed=True))),
            Node.let("run", Expr.select(var("done"), Expr.add(start, var("prefix")), u(1 << 31)))]


@cache
def radix_onesweep(shift: int, key_in: DataType | None, key_out: DataType | None, values: str, items: int,
                   n_word: int, region_word: int, spin: tuple[int, int] = SPIN,
                   width: int = LOOKBACK_WIDTH, raw: DataType = U32, value_raw: DataType = U32,
                   registers: bool = ONESWEEP_KEYS_IN_REGISTERS) -> Program:
    """One stable pass of LSD radix sort, one tile per workgroup, with decoupled look-back (Onesweep).

    Invocation 0 takes the tile id from pass ``p``'s counter ``lookback[p]``, so every lower tile
    has started. First the tile's digits are counted (``_early_counts``) and invocation ``t``
    publishes the tile's count of digit ``t`` as ``count | FLAG_A`` (tile 0: ``count | FLAG_P``)
    with an atomic exchange. The tile is then ranked, placed and written as in ``radix_scatter``;
    between ranking and placing, invocation ``t`` looks back over lower tiles, last first, adding
    their counts until one holds an inclusive prefix (``FLAG_P``); a word still 0 (not published
    yet) is read again. It then publishes ``(prefix + count) | FLAG_P`` and the
    tile's keys of digit ``t`` go to ``starts[t] + prefix + rank in tile``. The wait is
    ``spin = (levels, trips)`` nested loops, at most ``trips**levels`` trips; if it runs out the
    digit's keys are not written (their positions are past 2^31) and ``status[0]`` counts the
    digit. Counts carry two flag bits, so ``n < 2^30``. Each workgroup zeroes its
    tile's words of the other region, which the next pass uses. A whole tile (``whole``: every
    tile but the last) reads and writes its keys without per-key tests, except in the place step.

    ``raw``: the keys' bits, U32 or U64 (64-bit keys: eight passes, shifts 0 to 56, and the
    ``lookback`` head of eight passes); ``value_raw``: the bits of loaded values (U32 or U64).
    ``registers``: read each key once, into registers, for the counts, ranking and place step
    (``vyre.lib._sort.registers``); else read the tile three times (the counts, the ranking and
    the place step each load it).
    """
    pass_, tile = shift // RADIX_BITS, WG * items
    passes = radix_passes(raw)
    n = var("n")
    other = Expr.add(u(lookback_head(passes)), Expr.mul(u((pass_ + 1) % 2), load_param(region_word)))
    body = [Node.let("n", load_param(n_word)),
            Node.if_(Expr.eq(lid(), u(0)), Node.store("tile_id", u(0), Expr.atomic(AtomicOp.ADD, "lookback",
                                                                                     u(pass_), u(1), relaxed=True))),
            Node.barrier(), Node.let("tile", Expr.load("tile_id", u(0))),
            Node.let("seg_base", Expr.mul(var("tile"), u(tile))),
            Node.let("limit", Expr.min(n, Expr.add(var("seg_base"), u(tile)))),
            Node.let("whole", Expr.eq(var("limit"), Expr.add(var("seg_base"), u(tile)))),  # all but the last tile
            Node.store("lookback", Expr.add(other, Expr.add(Expr.mul(var("tile"), u(1 << RADIX_BITS)), lid())), u(0))]
    publish = _publish(pass_, region_word, lookback_head(passes))
    look_back = _look_back(pass_, spin, width, lookback_starts(passes))
    if registers:
        body += [*_register_counts(key_in, shift, items, raw), *publish,
                 *registers_tile.radix_tile(shift, key_out, values, items, look_back,
                                            math.gcd(ONESWEEP_REGISTER_ROUNDS, items), ONESWEEP_RANKS_IN_REGISTERS,
                                            raw)]
    else:
        body += [*_early_counts(key_in, shift, items, raw), *publish,
                 *radix_tiles(shift, key_in, key_out, values, items, u(1), look_back, raw)]
    buffers = radix_buffers(BufferDecl.read_write("lookback", 1, U32), values, items, 1, ("status",), raw,
                             value_raw, ranks=not (registers and ONESWEEP_RANKS_IN_REGISTERS))
    buffers += [BufferDecl.workgroup("tile_id", 1, U32), BufferDecl.workgroup("hist", 1 << RADIX_BITS, U32)]
    wide = "" if raw is U32 else f"{8 * raw.size}"
    return Program(buffers, WG_SIZE, body, name=f"lib_radix_onesweep{wide}_{shift}")
