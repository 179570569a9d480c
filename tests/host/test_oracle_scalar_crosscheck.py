"""Cross-check of the oracle's masked, vectorised control flow against a one-invocation-at-a-time walker.

The walker below runs each invocation to completion in linear order (so atomics see the same
order as the oracle's), using the oracle's per-op tables (checked separately in
test_semantics_tables.py) but none of its masks, memories or scans. It handles programs without
barriers and subgroup ops, where a race-free program cannot tell the two schedules apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver.config import effective_workgroup
from vyre.driver.inputs import prepare_host_dispatch
from vyre.ir import AtomicOp, Barrier, DataType
from vyre.ir.expr import Expr
from vyre.ir.node import Assign, Block, If, Let, Loop, Region, Return, Store
from vyre.ir.walk import iter_all_exprs, iter_nodes
from vyre.ops import get_op
from vyre.reference import scalar_ops
from vyre.reference.interpreter import execute, literal
from vyre.reference.ulp import assert_outputs_equal

generate = pytest.importorskip("vyre.ir.generate", reason="the random program generator is not in this tree yet")
LANE = scalar_ops.LANE_DTYPE
ATOMIC = {
    AtomicOp.ADD: lambda m, x, e: m + x, AtomicOp.OR: lambda m, x, e: m | x, AtomicOp.AND: lambda m, x, e: m & x,
    AtomicOp.XOR: lambda m, x, e: m ^ x, AtomicOp.MIN: lambda m, x, e: min(m, x),
    AtomicOp.MAX: lambda m, x, e: max(m, x), AtomicOp.EXCHANGE: lambda m, x, e: x,
    AtomicOp.COMPARE_EXCHANGE: lambda m, x, e: x if m == e else m,
}


class _Returned(Exception):
    pass


def _component(linear: int, dims: tuple[int, int, int], axis: int) -> int:
    stride = 1
    for d in dims[:axis]:
        stride *= d
    return (linear // stride) % dims[axis]


class Walker:
    """Runs one invocation at a time; ``memory`` maps buffer names to numpy arrays."""

    def __init__(self, program, arrays, grid, workgroup) -> None:
        self.program, self.arrays, self.grid, self.wg = program, arrays, grid, workgroup

    def run(self) -> None:
        groups = self.grid[0] * self.grid[1] * self.grid[2]
        per = self.wg[0] * self.wg[1] * self.wg[2]
        for w in range(groups):
            self.memory = dict(self.arrays)
            for b in self.program.buffers:
                if b.is_workgroup:
                    self.memory[b.name] = np.zeros(b.count, b.dtype.np_dtype)
            for lane in range(per):
                self.ids = {"workgroup_id": [_component(w, self.grid, a) for a in range(3)],
                            "local_id": [_component(lane, self.wg, a) for a in range(3)]}
                self.ids["invocation_id"] = [self.ids["workgroup_id"][a] * self.wg[a] + self.ids["local_id"][a]
                                             for a in range(3)]
                self.vars: dict[str, object] = {}
                try:
                    self.body(self.program.body)
                except _Returned:
                    pass

    def body(self, nodes) -> None:
        for node in nodes:
            if isinstance(node, (Let, Assign)):
                self.vars[node.name] = self.eval(node.value)
            elif isinstance(node, Store):
                self.store(node.buffer, int(self.eval(node.index)), self.eval(node.value))
            elif isinstance(node, If):
                self.body(node.then if self.eval(node.cond) else node.otherwise)
            elif isinstance(node, Loop):
                for i in range(int(self.eval(node.start)), int(self.eval(node.end))):
                    self.vars[node.var] = np.uint32(i)
                    self.body(node.body)
            elif isinstance(node, (Block, Region)):
                self.body(node.body)
            elif isinstance(node, Return):
                raise _Returned

    def decl(self, name: str):
        return self.program.buffer(name)

    def load(self, name: str, index: int):
        decl, data = self.decl(name), self.memory[name]
        arith = LANE[decl.dtype.arith]
        if index >= len(data):
            return arith.type(0)
        raw = data[index : index + 1]
        if decl.dtype is DataType.BF16:
            return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)[0]
        if decl.dtype is DataType.BOOL:
            return np.bool_(raw[0] != 0)
        return raw.astype(arith)[0]

    def store(self, name: str, index: int, value) -> None:
        decl, data = self.decl(name), self.memory[name]
        if index >= len(data):
            return
        if decl.dtype is DataType.BF16:
            b = int(np.float32(value).view(np.uint32))
            nan = (b & 0x7FFFFFFF) > 0x7F800000
            up, low = b >> 16, b & 0xFFFF
            data[index] = (up | 0x40) if nan else (up + (low > 0x8000 or (low == 0x8000 and up & 1))) & 0xFFFF
        else:
            data[index] = np.asarray(value).astype(decl.dtype.np_dtype)

    def eval(self, e: Expr):
        op, args = e.op, e.args
        if op == "lit":
            return literal(e)
        if op == "var":
            return self.vars[e.name]
        if op in scalar_ops.BINARY:
            return scalar_ops.BINARY[op](self.eval(args[0]), self.eval(args[1]))
        if op in scalar_ops.UNARY:
            return scalar_ops.UNARY[op](self.eval(args[0]))
        if op == "load":
            return self.load(e.name, int(self.eval(args[0])))
        if op == "buf_len":
            return np.uint32(len(self.memory[e.name]))
        if op in self.ids:
            return np.uint32(self.ids[op][e.value])
        if op == "select":
            cond, a, b = (self.eval(x) for x in args)
            return a if cond else b
        if op == "cast":
            return scalar_ops.cast(e.dtype, self.eval(args[0]))
        if op == "fma":
            return scalar_ops.fma(*(self.eval(x) for x in args))
        if op == "atomic":
            return self.atomic(e)
        if op == "call":
            return self.call(e)
        raise NotImplementedError(op)

    def call(self, e: Expr):
        """A composed op, call by value without ``vyre.ir.expand``: each argument once, in order."""
        names = []
        for arg in e.args:
            value = self.eval(arg)
            names.append(f"\0arg{len(self.vars)}")  # a name no program uses
            self.vars[names[-1]] = value
        result = self.eval(get_op(e.name).expand(*map(Expr.var, names)))
        for name in names:
            del self.vars[name]
        return result

    def atomic(self, e: Expr):
        index, value = int(self.eval(e.args[0])), self.eval(e.args[1])
        expected = self.eval(e.args[2]) if len(e.args) == 3 else None
        data = self.memory[e.name]
        if index >= len(data):
            return data.dtype.type(0)
        old = data[index]
        data[index] = np.asarray(ATOMIC[e.value.base](old, value, expected)).astype(data.dtype)
        return old


def _walkable(program) -> bool:
    if any(isinstance(n, Barrier) for n in iter_nodes(program.body)):
        return False
    return not any(e.op.startswith("subgroup_") or (e.op == "call" and get_op(e.name).expand is None)
                   for e in iter_all_exprs(program.body))


def test_vectorised_oracle_matches_one_invocation_at_a_time() -> None:
    checked = 0
    for seed in range(150):
        case = generate.generate_case(seed, **({"max_depth": 5, "max_stmts": 20} if seed % 2 else {}))
        if not _walkable(case.program):
            continue
        wg = effective_workgroup(case.program, case.config)
        fast = prepare_host_dispatch(case.program, case.inputs, case.config)
        slow = prepare_host_dispatch(case.program, case.inputs, case.config)
        if fast.grid[0] * fast.grid[1] * fast.grid[2] * wg[0] * wg[1] * wg[2] > 4096:
            continue
        execute(case.program, fast.arrays, fast.grid, wg)
        with np.errstate(all="ignore"):
            Walker(case.program, slow.arrays, slow.grid, wg).run()
        assert_outputs_equal(slow.outputs(case.program), fast.outputs(case.program), case.program)
        checked += 1
    assert checked >= 40, f"only {checked} generated programs were walkable"
