"""The program of run lengths: the distance between consecutive run starts."""

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
