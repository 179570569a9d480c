"""``find_all``: every (overlapping) occurrence of a byte string in a byte array, on any backend.

Each invocation owns ``POSITIONS`` consecutive start positions of the haystack (its tile plus the
``len(needle) - 1`` bytes of overlap it reads past the end). One kernel counts each invocation's
matches, the library's scan turns the counts into output offsets, and a second kernel writes
each invocation's match positions at its offset, so the offsets come out in ascending order with
no sort. Only the counted prefix of the result crosses back to the host.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any, NamedTuple

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lib._scan.topology import scan
from vyre.lib.blocks import PARAM_WORDS, WG
from vyre.lib.io import Call, as_array, library_call
from vyre.lib.monoid import COUNT
from vyre.lib.plan import capacity, ceil_div

POSITIONS = 16          # start positions per invocation
MAX_NEEDLE = 1 << 16    # bytes
U8, U32 = DataType.U8, DataType.U32


def _matches_at(p: Expr, n: Expr, m: Expr, tag: str) -> list[Node]:
    """Bind ``hit_<tag>`` (BOOL): the needle starts at byte ``p`` of the haystack."""
    hit = Expr.var(f"hit_{tag}")
    fits = Expr.and_(Expr.le(m, n), Expr.le(p, Expr.sub(n, m)))
    return [
        Node.let(f"hit_{tag}", Expr.and_(fits, Expr.eq(Expr.load("haystack", p), Expr.load("needle", Expr.u32(0))))),
        Node.loop(f"j_{tag}", Expr.u32(1), m, [
            Node.if_(hit, [Node.assign(f"hit_{tag}", Expr.eq(Expr.load("haystack", Expr.add(p, Expr.var(f"j_{tag}"))),
                                                             Expr.load("needle", Expr.var(f"j_{tag}"))))]),
        ]),
    ]


def _params(binding: int) -> BufferDecl:
    return BufferDecl.uniform("params", binding, U32, PARAM_WORDS)


def _position(k: int) -> Expr:
    return Expr.add(Expr.mul(Expr.invocation_id(0), Expr.u32(POSITIONS)), Expr.u32(k))


@cache
def count_program(n_word: int, m_word: int) -> Program:
    """``counts[t]`` = number of matches starting in invocation ``t``'s positions."""
    n, m = Expr.load("params", Expr.u32(n_word)), Expr.load("params", Expr.u32(m_word))
    body: list[Node] = [Node.let("count", Expr.u32(0))]
    for k in range(POSITIONS):
        body += _matches_at(_position(k), n, m, str(k))
        body.append(Node.if_(Expr.var(f"hit_{k}"), [Node.assign("count", Expr.add(Expr.var("count"), Expr.u32(1)))]))
    body.append(Node.store("counts", Expr.invocation_id(0), Expr.var("count")))
    return Program([BufferDecl.read("haystack", 0, U8), BufferDecl.read("needle", 1, U8),
                    BufferDecl.read_write("counts", 2, U32), _params(3)], (WG, 1, 1), body,
                   name="text_find_count")


@cache
def write_program(n_word: int, m_word: int) -> Program:
    """Write invocation ``t``'s match positions from ``ends[t] - counts[t]`` (its exclusive offset) on."""
    n, m = Expr.load("params", Expr.u32(n_word)), Expr.load("params", Expr.u32(m_word))
    t = Expr.invocation_id(0)
    body: list[Node] = [Node.let("at", Expr.sub(Expr.load("ends", t), Expr.load("counts", t)))]
    for k in range(POSITIONS):
        body += _matches_at(_position(k), n, m, str(k))
        body.append(Node.if_(Expr.var(f"hit_{k}"), [
            Node.store("offsets", Expr.var("at"), _position(k)),
            Node.assign("at", Expr.add(Expr.var("at"), Expr.u32(1))),
        ]))
    return Program([BufferDecl.read("haystack", 0, U8), BufferDecl.read("needle", 1, U8),
                    BufferDecl.read("counts", 2, U32), BufferDecl.read("ends", 3, U32),
                    BufferDecl.read_write("offsets", 4, U32), _params(5)], (WG, 1, 1), body,
                   name="text_find_write")


def _bytes(x: object, name: str) -> object:
    """``bytes``-like input as a uint8 numpy array; arrays pass through for ``as_array`` to check."""
    if isinstance(x, (bytes, bytearray, memoryview)):
        return np.frombuffer(x, dtype=np.uint8)
    if isinstance(x, str):
        raise InvalidProgram(f"{name} is a str; find_all searches bytes",
                             f"encode it first, e.g. {name}.encode('utf-8').")
    return x


def _needle(needle: object) -> np.ndarray:
    """The needle as contiguous bytes: bytes, or integers 0..255 (other values would be truncated to a byte)."""
    values = np.asarray(_bytes(needle, "needle"))
    fix = "pass bytes (b'...'), or an integer array of byte values 0..255 (np.frombuffer(data, np.uint8))."
    if values.dtype.kind not in "iu":
        raise InvalidProgram(f"needle has dtype {values.dtype}; find_all takes byte values 0..255", fix)
    if values.size and (int(values.min()) < 0 or int(values.max()) > 255):
        raise InvalidProgram(f"needle holds values outside 0..255 (min {values.min()}, max {values.max()})", fix)
    return np.ascontiguousarray(values, dtype=np.uint8).reshape(-1)


@library_call
def find_all(haystack: object, needle: object, *, backend: Any = None, scratch: Any = None) -> Any:
    """Start offsets (u32, ascending) of every occurrence of ``needle`` in ``haystack``, overlaps included.

    ``haystack``: bytes, a uint8 numpy array, or a uint8 device array on ``cuda`` (then the result is a
    CuPy array). ``needle``: 1 to 65536 bytes (``bytes``, or integers 0..255).
    """
    text = as_array(_bytes(haystack, "haystack"), "haystack", (U8,))
    pattern = _needle(needle)
    if not 1 <= pattern.size <= MAX_NEEDLE:
        raise InvalidProgram(f"needle has {pattern.size} bytes; find_all takes 1 to {MAX_NEEDLE}",
                             "pass a non-empty needle of at most 64 KiB.")
    call = Call(backend, scratch, text)
    threads = ceil_div(text.n, POSITIONS)
    if text.n < pattern.size:
        return call.empty(np.dtype(np.uint32))
    plan = call.plan()
    n_word, m_word = plan.word("text.n", text.n), plan.word("text.m", pattern.size)
    h_text = call.upload(plan, "text.haystack", text)
    # the needle travels in the call's order: on a device call a copy on the caller's stream (a host
    # upload into shared scratch could overwrite it before the last call's write pass read it)
    h_needle = call.upload(plan, "text.needle", as_array(pattern, "needle", (U8,)))
    counts, ends = plan.buffer("text.counts", threads), plan.buffer("text.ends", threads)
    groups = ceil_div(capacity(threads), WG)
    plan.step(count_program(n_word, m_word), [h_text, h_needle, counts, plan.params], groups)
    scan(plan, COUNT, counts, ends, threads, capacity(threads), True, role="text.scan")
    (last,) = call.run(plan, [(ends, 4 * (threads - 1), 4)])
    total = int(last.view(np.uint32)[0])
    offsets = call.result(plan, "text.offsets", max(total, 1))
    if total:
        write = call.plan()
        write.word("text.n", text.n)
        write.word("text.m", pattern.size)
        write.step(write_program(n_word, m_word), [h_text, h_needle, counts, ends, offsets, write.params], groups)
        call.run(write)
    return call.output(offsets, np.dtype(np.uint32), total)


# ---- many needles at once ------------------------------------------------------------------------
MAX_NEEDLES = 10_000
KEY_BYTES = 4             # at most this many leading bytes make a needle's key
FILTER_BITS = 16          # the filter and the buckets are indexed by a 16-bit hash of the key
FILTER_WORDS = (1 << FILTER_BITS) // 32
MAX_TILES_PER_GROUP = 16  # a counting workgroup scans up to this many tiles of WG * POSITIONS positions,
MIN_GROUPS = 2048         # fewer where that would leave fewer workgroups than this (to fill the device)
_GOLDEN = 0x9E3779B1      # Fibonacci hashing: the key times this, top FILTER_BITS bits


class NeedleTable(NamedTuple):
    """The needles as the kernels read them. ``data``: every needle end to end, ``starts``/``lens``
    each one's place in it; ``width``: key bytes (the shortest needle's length, at most 4); per
    hash bucket of a key, ``buckets[h]:buckets[h + 1]`` is its range of ``keys`` (big-endian first
    ``width`` bytes) and ``ids`` (the needle), ascending by id; ``filter``: bit ``h`` set where
    bucket ``h`` is not empty."""

    data: np.ndarray
    starts: np.ndarray
    lens: np.ndarray
    width: int
    filter: np.ndarray
    buckets: np.ndarray
    keys: np.ndarray
    ids: np.ndarray


def key_hash(keys: np.ndarray) -> np.ndarray:
    """The bucket of each u32 key, as the kernels compute it (wrapping multiply, top bits)."""
    return ((keys.astype(np.uint64) * _GOLDEN) & 0xFFFFFFFF) >> (32 - FILTER_BITS)


def needle_table(needles: object) -> NeedleTable:
    """The checked needles (a list of 1 to ``MAX_NEEDLES``, each 1 to ``MAX_NEEDLE`` bytes) as a
    ``NeedleTable``; a list of ``bytes`` is joined without a check per needle, and its table is
    kept for the next calls with the same needles."""
    if not isinstance(needles, (list, tuple)):
        raise InvalidProgram(f"needles is a {type(needles).__name__}; find_all_many takes a list of needles",
                             "pass a list or tuple of needles, e.g. [b'cat', b'dog'] (for one needle use find_all).")
    if not 1 <= len(needles) <= MAX_NEEDLES:
        raise InvalidProgram(f"{len(needles)} needles; find_all_many takes 1 to {MAX_NEEDLES:,}",
                             f"pass at least one needle, and split larger sets into calls of {MAX_NEEDLES:,}.")
    if all(type(x) is bytes for x in needles):
        return _bytes_table(tuple(needles))
    parts = [_needle(x) for x in needles]
    return _table(np.concatenate(parts), np.array([x.size for x in parts], dtype=np.int64))


@lru_cache(maxsize=8)
def _bytes_table(needles: tuple[bytes, ...]) -> NeedleTable:
    return _table(np.frombuffer(b"".join(needles), dtype=np.uint8), np.fromiter(map(len, needles), np.int64))


def _table(data: np.ndarray, lens: np.ndarray) -> NeedleTable:
    """The table of the needles ``data`` holds end to end, ``lens`` bytes each (checked here)."""
    if lens.min() < 1 or lens.max() > MAX_NEEDLE:
        raise InvalidProgram(f"a needle has {int(lens.min()) if lens.min() < 1 else int(lens.max())} bytes; "
                             f"find_all_many takes needles of 1 to {MAX_NEEDLE} bytes", "drop empty needles and "
                             "split longer ones.")
    width = min(KEY_BYTES, int(lens.min()))
    starts = (np.cumsum(lens) - lens).astype(np.uint32)
    keys = np.zeros(lens.size, dtype=np.uint32)
    for j in range(width):   # big-endian, so equal keys are equal prefixes
        keys = (keys << 8) | data[starts + j]
    bucket = key_hash(keys)
    order = np.argsort(bucket, kind="stable")          # by bucket, then needle id
    buckets = np.zeros((1 << FILTER_BITS) + 1, dtype=np.uint32)
    np.cumsum(np.bincount(bucket, minlength=1 << FILTER_BITS), out=buckets[1:])
    bits = np.zeros(FILTER_WORDS, dtype=np.uint32)
    np.bitwise_or.at(bits, bucket >> 5, (np.uint64(1) << (bucket & 31)).astype(np.uint32))
    table = NeedleTable(data, starts, lens.astype(np.uint32), width, bits, buckets, keys[order],
                        order.astype(np.uint32))
    for array in table:
        if isinstance(array, np.ndarray):
            array.flags.writeable = False   # tables of bytes needles are shared between calls
    return table


def _verify(p: Expr, n: Expr, width: int, body: list[Node]) -> list[Node]:
    """``body`` if needle ``pid`` (bound) occurs at ``p``; its first ``width`` bytes are known to match."""
    start, length, j = Expr.var("start"), Expr.var("length"), Expr.var("j")
    return [
        Node.let("start", Expr.load("starts", Expr.var("pid"))),
        Node.let("length", Expr.load("lens", Expr.var("pid"))),
        Node.let("hit", Expr.le(length, n - p)),   # p < n here, so n - p does not wrap
        Node.loop("j", Expr.u32(width), length, [
            Node.if_(Expr.var("hit"), [Node.assign("hit", Expr.eq(Expr.load("haystack", p + j),
                                                                   Expr.load("needles", start + j)))]),
        ]),
        Node.if_(Expr.var("hit"), body),
    ]


def _scan_slot(slot: Expr, n: Expr, width: int, bits: str, body: list[Node]) -> list[Node]:
    """``body`` once per (position, needle) match in slot ``slot``'s ``POSITIONS`` start positions,
    by position and then needle id, with ``p`` and ``pid`` bound.

    The key (the ``width`` bytes at ``p``, big-endian) slides one byte per position; its hash picks
    a bit of the filter (buffer ``bits``) and, when set, a bucket whose entries of equal key are
    verified."""
    mask = (1 << (8 * width)) - 1
    key, p, h, c = Expr.var("key"), Expr.var("p"), Expr.var("h"), Expr.var("c")
    base = slot * POSITIONS
    nodes: list[Node] = [Node.let("key", Expr.u32(0))]
    for j in range(width - 1):  # out-of-range loads read 0; such keys are never used
        nodes.append(Node.assign("key", (key << 8) | Expr.cast(U32, Expr.load("haystack", base + j))))
    step = (key << 8) | Expr.cast(U32, Expr.load("haystack", p + (width - 1)))
    candidate = [Node.if_(Expr.eq(Expr.load("keys", c), key),
                          [Node.let("pid", Expr.load("ids", c)), *_verify(p, n, width, body)])]
    nodes.append(Node.loop("k", Expr.u32(0), Expr.u32(POSITIONS), [
        Node.let("p", base + Expr.var("k")),
        Node.if_(Expr.lt(p, n - (width - 1)), [   # the key fits (the caller checked n >= width)
            Node.assign("key", step if width == KEY_BYTES else step & mask),
            Node.let("h", (key * _GOLDEN) >> (32 - FILTER_BITS)),
            Node.if_(Expr.ne((Expr.load(bits, h >> 5) >> (h & 31)) & 1, Expr.u32(0)), [
                Node.loop("c", Expr.load("buckets", h), Expr.load("buckets", h + 1), candidate),
            ]),
        ]),
    ]))
    return nodes


_MANY_INPUTS = (BufferDecl.read("haystack", 0, U8), BufferDecl.read("needles", 1, U8),
                BufferDecl.read("starts", 2, U32), BufferDecl.read("lens", 3, U32),
                BufferDecl.read("filter", 4, U32), BufferDecl.read("buckets", 5, U32),
                BufferDecl.read("keys", 6, U32), BufferDecl.read("ids", 7, U32))


def tiles_per_group(tiles: int) -> int:
    """How many tiles each counting workgroup scans (one filter copy each)."""
    return max(1, min(MAX_TILES_PER_GROUP, tiles // MIN_GROUPS))


@cache
def many_count_program(n_word: int, tiles_word: int, per_word: int, width: int) -> Program:
    """``counts[t]`` = the (position, needle) matches starting in slot ``t``'s positions. Each workgroup
    copies the filter into shared memory once, then scans ``per`` consecutive tiles (``tiles`` in all)."""
    n, tiles = Expr.load("params", Expr.u32(n_word)), Expr.load("params", Expr.u32(tiles_word))
    per = Expr.load("params", Expr.u32(per_word))
    lid, tile = Expr.local_id(0), Expr.var("tile")
    slot = tile * WG + lid
    body: list[Node] = [
        Node.loop("w", Expr.u32(0), Expr.u32(FILTER_WORDS // WG), [
            Node.store("bits", Expr.var("w") * WG + lid, Expr.load("filter", Expr.var("w") * WG + lid)),
        ]),
        Node.barrier(),
        Node.loop("s", Expr.u32(0), per, [
            Node.let("tile", Expr.workgroup_id(0) * per + Expr.var("s")),
            Node.if_(Expr.lt(tile, tiles), [
                Node.let("count", Expr.u32(0)),
                *_scan_slot(slot, n, width, "bits", [Node.assign("count", Expr.var("count") + 1)]),
                Node.store("counts", slot, Expr.var("count")),
            ]),
        ]),
    ]
    return Program([*_MANY_INPUTS, BufferDecl.read_write("counts", 8, U32), _params(9),
                    BufferDecl.workgroup("bits", FILTER_WORDS, U32)], (WG, 1, 1), body,
                   name=f"text_find_many_count_k{width}")


@cache
def many_write_program(n_word: int, width: int) -> Program:
    """Write slot ``t``'s ``(offset, pattern id)`` matches from its exclusive offset on (slots with none skip)."""
    n, t = Expr.load("params", Expr.u32(n_word)), Expr.invocation_id(0)
    at = Expr.var("at")
    emit = [Node.store("offsets", at, Expr.var("p")), Node.store("pattern", at, Expr.var("pid")),
            Node.assign("at", at + 1)]
    body = [Node.let("mine", Expr.load("counts", t)),
            Node.if_(Expr.ne(Expr.var("mine"), Expr.u32(0)), [
                Node.let("at", Expr.load("ends", t) - Expr.var("mine")),
                *_scan_slot(t, n, width, "filter", emit),
            ])]
    return Program([*_MANY_INPUTS, BufferDecl.read("counts", 8, U32), BufferDecl.read("ends", 9, U32),
                    BufferDecl.read_write("offsets", 10, U32), BufferDecl.read_write("pattern", 11, U32),
                    _params(12)], (WG, 1, 1), body, name=f"text_find_many_write_k{width}")


@library_call
def find_all_many(haystack: object, needles: object, *, backend: Any = None, scratch: Any = None) -> tuple[Any, Any]:
    """Every occurrence of every needle: ``(offsets, pattern_ids)`` (u32), sorted by offset and then by
    pattern id (the needle's index in ``needles``; a needle listed twice is reported under both ids),
    overlaps included.

    ``haystack`` as in ``find_all`` (a CuPy haystack gives CuPy results); ``needles``: a list of 1 to
    10,000 needles of 1 to 65536 bytes each (``bytes``, or integer arrays of byte values 0..255).
    """
    text = as_array(_bytes(haystack, "haystack"), "haystack", (U8,))
    table = needle_table(needles)
    call = Call(backend, scratch, text)
    if text.n < table.width:
        return call.empty(np.dtype(np.uint32)), call.empty(np.dtype(np.uint32))
    threads = ceil_div(text.n, POSITIONS)
    tiles = ceil_div(capacity(threads), WG)
    plan = call.plan()
    per = tiles_per_group(tiles)
    n_word, tiles_word = plan.word("text.n", text.n), plan.word("text.tiles", tiles)
    per_word = plan.word("text.per", per)
    handles = [call.upload(plan, "text.haystack", text)]
    for role, array in (("text.needles", table.data), ("text.starts", table.starts), ("text.lens", table.lens),
                        ("text.filter", table.filter), ("text.buckets", table.buckets), ("text.keys", table.keys),
                        ("text.ids", table.ids)):
        handles.append(call.upload(plan, role, as_array(array, role, (U8, U32))))  # device calls: on their stream
    counts, ends = plan.buffer("text.counts", threads), plan.buffer("text.ends", threads)
    plan.step(many_count_program(n_word, tiles_word, per_word, table.width), [*handles, counts, plan.params],
              ceil_div(tiles, per))
    scan(plan, COUNT, counts, ends, threads, capacity(threads), True, role="text.scan")
    (last,) = call.run(plan, [(ends, 4 * (threads - 1), 4)])
    total = int(last.view(np.uint32)[0])
    offsets = call.result(plan, "text.offsets", max(total, 1))
    pattern = call.result(plan, "text.pattern", max(total, 1))
    if total:
        write = call.plan()
        write.word("text.n", text.n)
        write.step(many_write_program(n_word, table.width), [*handles, counts, ends, offsets, pattern, write.params],
                   tiles)
        call.run(write)
    return call.output(offsets, np.dtype(np.uint32), total), call.output(pattern, np.dtype(np.uint32), total)
