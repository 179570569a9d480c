"""The programs of runs: run lengths (the distance between consecutive run starts) and the values
of ``unique(key_range=...)`` (bin indices plus ``lo``)."""

from __future__ import annotations

from functools import cache

from vyre.ir import BufferDecl, Expr, Node, Program
from vyre.lib.blocks import U32, WG_SIZE, load_param, params, u


@cache
def run_lengths(n_word: int) -> Program:
    """``lengths[j] = starts[j+1] - starts[j]`` (the last run ends at ``n``), for ``j < count[0]``."""
    j, runs, n = Expr.invocation_id(0), Expr.load("count", u(0)), load_param(n_word)
    end = Expr.select(Expr.lt(Expr.add(j, u(1)), runs), Expr.load("starts", Expr.add(j, u(1))), n)
    body = [Node.if_(Expr.lt(j, runs), Node.store("lengths", j, Expr.sub(end, Expr.load("starts", j))))]
    buffers = [BufferDecl.read("starts", 0, U32), BufferDecl.read("count", 1, U32),
               BufferDecl.read_write("lengths", 2, U32), params(3)]
    return Program(buffers, WG_SIZE, body, name="lib_run_lengths")


@cache
def offset_values(n_word: int, lo_word: int) -> Program:
    """``out[i] = index[i] + lo`` (u32 arithmetic: the bits of i32 values too) for ``i < n``."""
    i = Expr.invocation_id(0)
    body = [Node.if_(Expr.lt(i, load_param(n_word)),
                     Node.store("out", i, Expr.add(Expr.load("index", i), load_param(lo_word))))]
    buffers = [BufferDecl.read("index", 0, U32), BufferDecl.read_write("out", 1, U32), params(2)]
    return Program(buffers, WG_SIZE, body, name="lib_unique_range_values")
