"""``KernelTemplate``: a ``@vyre.kernel`` with ``vyre.Const`` parameters, one ``Kernel`` per value.

The decorator cannot lower such a function until the constants are known: it returns a template
that lowers it on first use of each distinct tuple of constant values and keeps the ``Kernel``
(its program, and the pipeline that kernel compiles) for the next call with the same values.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vyre.driver.errors import InvalidProgram, ValidationError
from vyre.frontend.annotations import BufferSpec
from vyre.frontend.consts import ConstSpec, Scalar
from vyre.frontend.lower import kernel_findings
from vyre.frontend.names import annotation_value
from vyre.frontend.source import SourceFile
from vyre.frontend.spec_cache import KernelKey
from vyre.ir.program import Access, Program

if TYPE_CHECKING:
    from vyre.frontend.kernel import Kernel


@dataclass(frozen=True)
class ConstParam:
    """A ``vyre.Const`` parameter: its name, its position among the call's inputs, its annotation."""

    name: str
    position: int
    spec: ConstSpec


def const_params(fndef: ast.FunctionDef, namespace: Callable[[str], Any], source: SourceFile) -> tuple[ConstParam, ...]:
    """The Const parameters of a kernel function; ``Out`` parameters take no input, so they have no position."""
    params, position = [], 0
    for arg in [*fndef.args.posonlyargs, *fndef.args.args]:
        spec = annotation_value(arg.annotation, namespace, source) if arg.annotation is not None else None
        if isinstance(spec, ConstSpec):
            params.append(ConstParam(arg.arg, position, spec))
        if spec is not None and not (isinstance(spec, BufferSpec) and spec.access is Access.OUTPUT):
            position += 1  # Out parameters take no input, absent ones (Annotated[T, None]) are not there
    return tuple(params)


class KernelTemplate:
    """A kernel with compile-time parameters: call it with their values in place, or ``bind`` them."""

    #: specialisations kept; past this many the oldest is dropped (and lowered again if used again)
    MAX_SPECIALISATIONS = 256

    def __init__(self, lower: Callable[[Mapping[str, Scalar]], Program], params: tuple[ConstParam, ...],
                 name: str | None, source: SourceFile | None = None, key: KernelKey | None = None) -> None:
        self.lower = lower  # the program for the Const values, lowered afresh (no cache)
        self.params = params
        self.name = name
        self.source = source
        self.key = key  # the specialisation cache's key (a kernel of the vyre package), else None
        self._positions = frozenset(p.position for p in params)
        self._last = max(self._positions, default=-1)
        self._kernels: dict[tuple[object, ...], Kernel] = {}

    def __repr__(self) -> str:
        return f"<vyre.kernel {self.name or '<unnamed>'} [{', '.join(p.name for p in self.params)}]>"

    @property
    def program(self) -> Any:
        """Refused: a template has one program per tuple of constant values."""
        raise InvalidProgram(f"kernel {self.name or '<unnamed>'} has compile-time parameters "
                             f"({', '.join(p.name for p in self.params)}), so it has one program per value",
                             f"take one specialisation's program: kernel.bind({self.params[0].name}=...).program.")

    @property
    def specialisations(self) -> tuple[Kernel, ...]:
        """The kernels lowered so far, oldest first."""
        return tuple(self._kernels.values())

    def bind(self, *values: object, **named: object) -> Kernel:
        """The ``Kernel`` for these constant values (in Const-parameter order, or by name), lowered once."""
        by_name = dict(zip((p.name for p in self.params), values))
        if len(values) > len(self.params) or set(by_name) & set(named):
            raise InvalidProgram(f"bind() got {len(values)} values and {sorted(named)} for the compile-time "
                                 f"parameters {[p.name for p in self.params]}",
                                 "pass each Const parameter's value once, by position or by name.")
        by_name.update(named)
        unknown = set(by_name) - {p.name for p in self.params}
        missing = [p.name for p in self.params if p.name not in by_name]
        if unknown or missing:
            raise InvalidProgram(f"bind() of kernel {self.name or '<unnamed>'}: unknown {sorted(unknown)}, "
                                 f"missing {missing}",
                                 f"pass exactly the Const parameters: {', '.join(p.name for p in self.params)}.")
        return self._kernel(tuple(by_name[p.name] for p in self.params))

    def program_for(self, values: Mapping[str, Scalar]) -> Program:
        """The program for these (checked) Const values: from the specialisation cache when it has a
        sound entry, else lowered (and stored there)."""
        if self.key is None:
            return self.lower(values)
        return self.key.program(values, lambda: self.lower(values), lambda p: not kernel_findings(p))

    def __call__(self, *inputs: Any, **options: Any) -> list[Any]:
        """Dispatch: the Const values sit at their parameters' positions among the inputs."""
        if len(inputs) <= self._last:
            p = next(p for p in self.params if p.position >= len(inputs))
            raise InvalidProgram(f"kernel {self.name or '<unnamed>'} takes its compile-time parameter {p.name!r} "
                                 f"as input {p.position} and got {len(inputs)} inputs",
                                 f"pass {p.name!r}'s value at its position, as for any parameter.")
        kernel = self._kernel(tuple(inputs[p.position] for p in self.params))
        return kernel(*(v for i, v in enumerate(inputs) if i not in self._positions), **options)

    def _kernel(self, values: tuple[object, ...]) -> Kernel:
        checked = [p.spec.check(p.name, v) for p, v in zip(self.params, values)]
        key = tuple(v.hex() if isinstance(v, float) else v for v in checked)  # 0.0 and -0.0 differ, NaN is NaN
        kernel = self._kernels.get(key)
        if kernel is None:
            from vyre.frontend.kernel import Kernel  # noqa: PLC0415 - kernel.py imports this module

            consts = dict(zip((p.name for p in self.params), checked))
            try:
                kernel = Kernel(self.program_for(consts), self.source, consts)
            except ValidationError as exc:
                raise exc.with_traceback(None) from None  # the finding names the user's line: skip our frames
            if len(self._kernels) >= self.MAX_SPECIALISATIONS:
                del self._kernels[next(iter(self._kernels))]
            self._kernels[key] = kernel
        return kernel
