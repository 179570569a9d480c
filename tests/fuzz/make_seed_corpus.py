"""Write the hand-picked seed cases of the regression corpus (``tests/fuzz/corpus/``).

Each case exercises a corner of docs/semantics.md that backends get wrong easily, and carries the
outputs worked out by hand from that page (not from the oracle), so replaying it checks the oracle
too. Run ``python tests/fuzz/make_seed_corpus.py`` after changing a case; the files are committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.fuzz import CorpusCase, write_case
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

CORPUS = Path(__file__).resolve().parent / "corpus"
D = DataType
INDEX = Expr.var("i")
MIN = -(2**31)


def _note(make) -> str:
    return " ".join(make.__doc__.split())


def _at(buffer: str) -> Expr:
    return Expr.load(buffer, INDEX)


def _elementwise(name: str, inputs: list[BufferDecl], results: dict[str, tuple[DataType, Expr]], n: int) -> Program:
    """``result[i] = expr`` for each named result, over inputs read at ``i``."""
    outputs = [BufferDecl.output(out, len(inputs) + k, dtype, n) for k, (out, (dtype, _)) in enumerate(results.items())]
    body = [Node.let("i", Expr.invocation_id(0))]
    body += [Node.store(out, INDEX, value) for out, (_, value) in results.items()]
    return Program([*inputs, *outputs], (n, 1, 1), body, name=name)


def i32_division_edges() -> CorpusCase:
    """I32 ``MIN / -1 = MIN``, ``MIN % -1 = 0``, ``x / 0 = -1``, ``x % 0 = 0``; quotients truncate toward
    zero and the remainder takes the dividend's sign."""
    a = np.array([MIN, MIN, 7, -7, 7, -7, MIN, 0], np.int32)
    b = np.array([-1, 1, 0, 2, -2, 0, 0, -1], np.int32)
    program = _elementwise("i32_division_edges", [BufferDecl.read("a", 0, D.I32), BufferDecl.read("b", 1, D.I32)], {
        "quotient": (D.I32, Expr.div(_at("a"), _at("b"))),
        "remainder": (D.I32, Expr.rem(_at("a"), _at("b"))),
    }, 8)
    quotient = np.array([MIN, MIN, -1, -3, -3, -1, -1, 0], np.int32)
    remainder = np.array([0, 0, 0, -1, 1, 0, 0, 0], np.int32)
    return CorpusCase(program.name, program, [a, b], DispatchConfig(elements=8),
                      _note(i32_division_edges), [quotient, remainder])


def shifts_and_float_edges() -> CorpusCase:
    """Shift amounts masked to 5 bits (37 -> 5, 63 -> 31), arithmetic I32 ``shr``; F32 ``round`` half away
    from zero (``round(-0.5) = -1``, ``round(-0.3) = -0.0``); ``min(-0.0, 0.0) = -0.0``, ``min(NaN, 1) = 1``."""
    x = np.array([1, 0x80000000, 0xF0000001, 0x12345678], np.uint32)
    s = np.array([37, 37, 63, 32], np.uint32)
    f = np.array([-0.5, 0.5, 2.5, -0.3], np.float32)
    g = np.array([-0.0, 0.0, np.nan, -np.inf], np.float32)
    h = np.array([0.0, -0.0, 1.0, 5.0], np.float32)
    inputs = [BufferDecl.read(n, k, t) for k, (n, t) in enumerate(
        (("x", D.U32), ("s", D.U32), ("f", D.F32), ("g", D.F32), ("h", D.F32)))]
    program = _elementwise("shifts_and_float_edges", inputs, {
        "shl": (D.U32, Expr.shl(_at("x"), _at("s"))),
        "shr_i32": (D.I32, Expr.shr(Expr.cast(D.I32, _at("x")), _at("s"))),
        "rotl": (D.U32, Expr.rotate_left(_at("x"), _at("s"))),
        "rounded": (D.F32, Expr.round(_at("f"))),
        "smaller": (D.F32, Expr.min(_at("g"), _at("h"))),
    }, 4)
    expected = [
        np.array([32, 0, 0x80000000, 0x12345678], np.uint32),
        np.array([0, -(2**26), -1, 0x12345678], np.int32),
        np.array([32, 0x10, 0xF8000000, 0x12345678], np.uint32),
        np.array([-1.0, 1.0, 3.0, -0.0], np.float32),
        np.array([-0.0, -0.0, 1.0, -np.inf], np.float32),
    ]
    return CorpusCase(program.name, program, [x, s, f, g, h], DispatchConfig(elements=4),
                      _note(shifts_and_float_edges), expected)


def out_of_bounds_atomics() -> CorpusCase:
    """Atomics at indices 0xFFFFFFFF, past the end and a negative I32 cast to U32 return 0 and write
    nothing; the one in-bounds atomic returns the old value and adds."""
    program = Program(
        [BufferDecl.read("idx", 0, D.U32), BufferDecl.read_write("acc", 1, D.U32),
         BufferDecl.output("old", 2, D.U32, 4), BufferDecl.output("old_negative", 3, D.I32, 4)],
        (4, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.let("o", Expr.atomic(AtomicOp.ADD, "acc", _at("idx"), Expr.u32(5))),
         Node.store("old", INDEX, Expr.var("o")),
         Node.let("n", Expr.atomic(AtomicOp.MAX, "acc", Expr.cast(D.U32, Expr.i32(-1)), Expr.u32(99))),
         Node.store("old_negative", INDEX, Expr.cast(D.I32, Expr.var("n")))],
        name="out_of_bounds_atomics")
    idx = np.array([0, 0xFFFFFFFF, 4, 0x80000000], np.uint32)
    acc = np.array([10, 20, 30, 40], np.uint32)
    expected = [np.array([15, 20, 30, 40], np.uint32), np.array([10, 0, 0, 0], np.uint32), np.zeros(4, np.int32)]
    return CorpusCase(program.name, program, [idx, acc], DispatchConfig(grid=(1, 1, 1)),
                      _note(out_of_bounds_atomics), expected)


SEEDS = (i32_division_edges, shifts_and_float_edges, out_of_bounds_atomics)


def main(directory: Path = CORPUS) -> list[Path]:
    """Write every seed case into ``directory``; returns the ``.vyre`` paths."""
    return [write_case(directory, make()) for make in SEEDS]


if __name__ == "__main__":
    for path in main(Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS):
        print(path)
