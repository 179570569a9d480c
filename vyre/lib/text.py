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
