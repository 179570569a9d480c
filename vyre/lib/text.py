"""``find_all``: every (overlapping) occurrence of a byte string in a byte array, on any backend.

Each invocation owns ``POSITIONS`` consecutive start positions of the haystack (its tile plus the
``len(needle) - 1`` bytes of overlap it reads past the end). One kernel counts each invocation's
matches, the library's scan turns the counts into output offsets, and a second kernel writes
each invocation's match positions at its offset, so the offsets come out in ascending order with
no sort. Only the counted prefix of the result crosses back to the host.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lib import plan as topo
from vyre.lib.blocks import WG
from vyre.lib.io import Call, as_array, library_call
from vyre.lib.kernels import PARAM_WORDS
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
    h_needle = plan.buffer("text.needle", pattern.size, 1)
    backend.upload_resident(h_needle, pattern)
    counts, ends = plan.buffer("text.counts", threads), plan.buffer("text.ends", threads)
    groups = ceil_div(capacity(threads), WG)
    plan.step(count_program(n_word, m_word), [h_text, h_needle, counts, plan.params], groups)
    topo.scan(plan, topo.COUNT, counts, ends, threads, capacity(threads), True, role="text.scan")
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
_KEY_BYTES = 4          # at most this many leading bytes make a needle's key
_SEARCH_STEPS = 15      # binary search over at most 2**15 keys


def _candidates_at(p: Expr, n: Expr, keys: Expr, width: int, body: list[Node]) -> list[Node]:
    """For start ``p``: the needles whose first ``width`` bytes are the haystack's there (the sorted
    ``keys`` range ``[lo, hi)`` of the key read at ``p``), ``body`` run once per full match in
    ascending pattern id, with ``pid`` bound."""
    key = Expr.u32(0)
    for j in range(width):  # big-endian, so equal keys are equal prefixes
        key = (key << 8) | Expr.cast(U32, Expr.load("haystack", p + j))

    def bound(name: str, upper: bool) -> list[Node]:
        lo, hi, mid = Expr.var(f"{name}_lo"), Expr.var(f"{name}_hi"), Expr.var(f"{name}_mid")
        below = Expr.le if upper else Expr.lt
        return [Node.let(f"{name}_lo", Expr.u32(0)), Node.let(f"{name}_hi", keys),
                Node.loop(f"{name}_step", Expr.u32(0), Expr.u32(_SEARCH_STEPS), [
                    Node.if_(Expr.lt(lo, hi), [
                        Node.let(f"{name}_mid", lo + ((hi - lo) >> 1)),
                        Node.if_(below(Expr.load("keys", mid), Expr.var("key")),
                                 [Node.assign(f"{name}_lo", mid + 1)], [Node.assign(f"{name}_hi", mid)]),
                    ]),
                ])]

    pid, start, length = Expr.var("pid"), Expr.var("start"), Expr.var("length")
    verify = [
        Node.let("pid", Expr.load("ids", Expr.var("c"))),
        Node.let("start", Expr.load("starts", pid)),
        Node.let("length", Expr.load("lens", pid)),
        Node.let("hit", Expr.le(length, n - p)),
        Node.loop("j", Expr.u32(width), length, [
            Node.if_(Expr.var("hit"), [Node.assign("hit", Expr.eq(Expr.load("haystack", p + Expr.var("j")),
                                                                   Expr.load("needles", start + Expr.var("j"))))]),
        ]),
        Node.if_(Expr.var("hit"), body),
    ]
    return [Node.if_(Expr.le(Expr.u32(width), n - p), [  # p < n here, so n - p does not wrap
        Node.let("key", key),
        *bound("first", False), *bound("past", True),
        Node.loop("c", Expr.var("first_lo"), Expr.var("past_lo"), verify),
    ])]


_MANY_INPUTS = (BufferDecl.read("haystack", 0, U8), BufferDecl.read("needles", 1, U8),
                BufferDecl.read("keys", 2, U32), BufferDecl.read("ids", 3, U32),
                BufferDecl.read("starts", 4, U32), BufferDecl.read("lens", 5, U32))


def _each_position(n: Expr, body: list[Node]) -> list[Node]:
    """``body`` for each of the invocation's ``POSITIONS`` start positions below ``n``, ascending (``p`` bound)."""
    return [Node.loop("k", Expr.u32(0), Expr.u32(POSITIONS), [
        Node.let("p", Expr.invocation_id(0) * POSITIONS + Expr.var("k")),
        Node.if_(Expr.lt(Expr.var("p"), n), body),
    ])]


@cache
def many_count_program(n_word: int, keys_word: int, width: int) -> Program:
    """``counts[t]`` = the (position, needle) matches starting in invocation ``t``'s positions."""
    n, keys = Expr.load("params", Expr.u32(n_word)), Expr.load("params", Expr.u32(keys_word))
    count = [Node.assign("count", Expr.var("count") + 1)]
    body = [Node.let("count", Expr.u32(0)),
            *_each_position(n, _candidates_at(Expr.var("p"), n, keys, width, count)),
            Node.store("counts", Expr.invocation_id(0), Expr.var("count"))]
    return Program([*_MANY_INPUTS, BufferDecl.read_write("counts", 6, U32), _params(7)], (WG, 1, 1), body,
                   name=f"text_find_many_count_k{width}")


@cache
def many_write_program(n_word: int, keys_word: int, width: int) -> Program:
    """Write invocation ``t``'s ``(offset, pattern id)`` matches from its exclusive offset on."""
    n, keys = Expr.load("params", Expr.u32(n_word)), Expr.load("params", Expr.u32(keys_word))
    t = Expr.invocation_id(0)
    at = Expr.var("at")
    emit = [Node.store("offsets", at, Expr.var("p")), Node.store("pattern", at, Expr.var("pid")),
            Node.assign("at", at + 1)]
    body = [Node.let("at", Expr.load("ends", t) - Expr.load("counts", t)),
            *_each_position(n, _candidates_at(Expr.var("p"), n, keys, width, emit))]
    return Program([*_MANY_INPUTS, BufferDecl.read("counts", 6, U32), BufferDecl.read("ends", 7, U32),
                    BufferDecl.read_write("offsets", 8, U32), BufferDecl.read_write("pattern", 9, U32), _params(10)],
                   (WG, 1, 1), body, name=f"text_find_many_write_k{width}")


def needle_table(needles: object) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Checked needles as the kernels' tables: the bytes end to end, each needle's start and length,
    the sorted keys (first ``width`` bytes, big-endian) with the needle id of each, and ``width``."""
    if not isinstance(needles, (list, tuple)):
        raise InvalidProgram(f"needles is a {type(needles).__name__}; find_all_many takes a list of needles",
                             "pass a list or tuple of needles, e.g. [b'cat', b'dog'] (for one needle use find_all).")
    if not 1 <= len(needles) <= MAX_NEEDLES:
        raise InvalidProgram(f"{len(needles)} needles; find_all_many takes 1 to {MAX_NEEDLES:,}",
                             f"pass at least one needle, and split larger sets into calls of {MAX_NEEDLES:,}.")
    parts = [_needle(x) for x in needles]
    lens = np.array([x.size for x in parts], dtype=np.int64)
    if lens.min() < 1 or lens.max() > MAX_NEEDLE:
        raise InvalidProgram(f"a needle has {int(lens.min()) if lens.min() < 1 else int(lens.max())} bytes; "
                             f"find_all_many takes needles of 1 to {MAX_NEEDLE} bytes", "drop empty needles and "
                             "split longer ones.")
    width = min(_KEY_BYTES, int(lens.min()))
    keys = np.zeros(len(parts), dtype=np.uint32)
    for part_index, part in enumerate(parts):
        keys[part_index] = int.from_bytes(part[:width].tobytes(), "big")
    order = np.lexsort((np.arange(len(parts)), keys)).astype(np.uint32)   # by key, then pattern id
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.uint32)
    return np.concatenate(parts), starts, lens.astype(np.uint32), keys[order], order, width


@library_call
def find_all_many(haystack: object, needles: object, *, backend: Any = None, scratch: Any = None) -> tuple[Any, Any]:
    """Every occurrence of every needle: ``(offsets, pattern_ids)`` (u32), sorted by offset and then by
    pattern id (the needle's index in ``needles``), overlaps included.

    ``haystack`` as in ``find_all``; ``needles``: a list of 1 to 10,000 needles of 1 to 65536 bytes each
    (``bytes``, or integer arrays of byte values 0..255).
    """
    text = as_array(_bytes(haystack, "haystack"), "haystack", (U8,))
    data, starts, lens, keys, ids, width = needle_table(needles)
    call = Call(backend, scratch, text)
    if text.n < width:
        return call.empty(np.dtype(np.uint32)), call.empty(np.dtype(np.uint32))
    threads = ceil_div(text.n, POSITIONS)
    plan = call.plan()
    n_word, keys_word = plan.word("text.n", text.n), plan.word("text.keys", keys.size)
    tables = [call.upload(plan, "text.haystack", text)]
    for role, table in (("text.needles", data), ("text.keys", keys), ("text.ids", ids), ("text.starts", starts),
                        ("text.lens", lens)):
        handle = plan.buffer(role, table.size, table.itemsize)
        backend.upload_resident(handle, table)
        tables.append(handle)
    counts, ends = plan.buffer("text.counts", threads), plan.buffer("text.ends", threads)
    groups = ceil_div(capacity(threads), WG)
    plan.step(many_count_program(n_word, keys_word, width), [*tables, counts, plan.params], groups)
    topo.scan(plan, topo.COUNT, counts, ends, threads, capacity(threads), True, role="text.scan")
    (last,) = call.run(plan, [(ends, 4 * (threads - 1), 4)])
    total = int(last.view(np.uint32)[0])
    offsets = call.result(plan, "text.offsets", max(total, 1))
    pattern = call.result(plan, "text.pattern", max(total, 1))
    if total:
        write = call.plan()
        write.word("text.n", text.n)
        write.word("text.keys", keys.size)
        write.step(many_write_program(n_word, keys_word, width),
                   [*tables, counts, ends, offsets, pattern, write.params], groups)
        call.run(write)
    return call.output(offsets, np.dtype(np.uint32), total), call.output(pattern, np.dtype(np.uint32), total)
