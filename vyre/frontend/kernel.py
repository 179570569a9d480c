"""``@vyre.kernel`` and ``@vyre.func``: Python functions as vyre programs.

The decorator reads the function's source once, lowers it (``lower.py``) and validates it; the
``Kernel`` it returns holds the ``Program`` and dispatches it. Nothing of the function runs in
Python at dispatch time: a call converts scalar arguments to 4-byte inputs and hands the inputs
to a ``CompiledPipeline`` made once per kernel on the default backend. A function with
``vyre.Const`` parameters becomes a ``KernelTemplate`` (``template.py``) instead, which lowers it
once per distinct tuple of constant values into such a ``Kernel``.
"""

from __future__ import annotations

import ast
import functools
import math
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import Finding, InvalidProgram, ValidationError
from vyre.frontend.lower import Lowering, Options, with_output_counts
from vyre.frontend.names import chain_lookup, enclosing_locals, namespace_of, static_value
from vyre.frontend.source import SourceFile, function_source
from vyre.frontend.spec_cache import KernelKey, kernel_key
from vyre.frontend.template import KernelTemplate, const_params
from vyre.ir.program import Access, Program
from vyre.ir.types import DataType

_FUNCTION_NAME = object()  # default of name=: the function's own name
_TRUE, _FALSE = struct.pack("<I", 1), struct.pack("<I", 0)


def _pack_bool(v: object) -> bytes:
    """A BOOL scalar is a 0/1 word: any truthy number is 1."""
    return _TRUE if v else _FALSE


_PACKERS = {DataType.U32: struct.Struct("<I").pack, DataType.I32: struct.Struct("<i").pack,
            DataType.F32: struct.Struct("<f").pack, DataType.BOOL: _pack_bool,
            DataType.U64: struct.Struct("<Q").pack, DataType.I64: struct.Struct("<q").pack,
            DataType.F64: struct.Struct("<d").pack}
_RANGES = {DataType.U32: "0 .. 4294967295", DataType.I32: "-2147483648 .. 2147483647", DataType.BOOL: "0 or 1",
           DataType.U64: "0 .. 18446744073709551615", DataType.I64: "-9223372036854775808 .. 9223372036854775807"}
_PLAIN_NUMBERS = frozenset({int, float})
_NUMBERS = (int, float, np.integer, np.floating)
_BOOLS = (bool, np.bool_)
def default_backend() -> Any:
    """``vyre.default_backend()``: the process's one default backend, shared with ``vyre.lib`` and the workloads."""
    from vyre.driver.registry import default_backend as shared_backend

    return shared_backend()


class Func:
    """A ``@vyre.func`` helper: inlined wherever a kernel calls it (its arguments bound once)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self._parsed: tuple[SourceFile, ast.FunctionDef] | None = None

    def parsed(self) -> tuple[SourceFile, ast.FunctionDef]:
        if self._parsed is None:
            self._parsed = function_source(self.fn)
        return self._parsed

    def __call__(self, *args: Any) -> Any:
        """Outside a kernel: the plain Python function (with ``Expr`` operator sugar it builds IR)."""
        return self.fn(*args)

    def __repr__(self) -> str:
        return f"<vyre.func {self.name}>"


def func(fn: Callable[..., Any]) -> Func:
    """Mark a helper that kernels may call; it is inlined (see docs/kernels.md)."""
    return Func(fn)


class Kernel:
    """A validated program made from a Python function; call it to dispatch."""

    def __init__(self, program: Program, source: SourceFile | None = None,
                 consts: Mapping[str, Any] | None = None) -> None:
        self.program = program
        self.source = source
        self.consts = dict(consts or {})  # the vyre.Const values it was lowered with
        self._sized_later = tuple(b.name for b in program.buffers if b.access is Access.OUTPUT and b.count == 0)
        self._scalars = tuple((i, _PACKERS[b.dtype], b.name, b.dtype) for i, b in enumerate(program.inputs)
                              if b.access is Access.UNIFORM and b.count == 1 and b.dtype in _PACKERS)
        self._names = tuple(b.name for b in program.inputs)
        self._fast = not self._sized_later  # the default call goes straight to a cached pipeline
        self._specialised: dict[tuple[int, ...], Program] = {}
        self._pipeline: Any = None

    @property
    def name(self) -> str | None:
        return self.program.name

    def __repr__(self) -> str:
        return f"<vyre.kernel {self.program.name or '<unnamed>'}>"

    def to_text(self) -> str:
        """The program's ``.vyre`` text form."""
        return self.program.to_text()

    def bind(self, *values: object, **named: object) -> Kernel:
        """This kernel: without ``vyre.Const`` parameters it is its own only specialisation (and takes no values)."""
        if values or named:
            raise InvalidProgram(f"kernel {self.program.name or '<unnamed>'} has no compile-time parameters and "
                                 f"bind() got {len(values) + len(named)} value(s)",
                                 "call bind() without values, or annotate the parameter vyre.Const[...].")
        return self

    @property
    def specialisations(self) -> tuple[Kernel, ...]:
        """``(self,)``: as for a kernel with ``vyre.Const`` parameters, the programs lowered so far."""
        return (self,)

    # ---- dispatch -----------------------------------------------------------------------------------
    def __call__(self, *inputs: Any, backend: Any = None, grid: Sequence[int] | None = None,
                 elements: int | None = None, config: DispatchConfig | None = None,
                 output_counts: Mapping[str, int] | None = None, stream: object | None = None) -> list[Any]:
        """Dispatch with one input per In/InOut/Uniform/scalar parameter, in order; returns the outputs.

        Device arrays (CuPy, torch, ...) are bound in place on ``cuda``: ``InOut`` arrays are updated
        and returned as the same objects, ``Out`` results are new arrays of the caller's kind, and
        the call is ordered on ``stream`` (default: the caller's current stream) without waiting."""
        args = self._convert(inputs)
        if backend is None and grid is None and elements is None and config is None and output_counts is None \
                and self._fast:
            pipeline = self._pipeline
            if pipeline is None:
                pipeline = self._default_pipeline()
            return pipeline.dispatch(args) if stream is None else pipeline.dispatch(args, stream=stream)
        config = _config(config, grid, elements)
        program = self.specialise(output_counts, config.elements)
        be = backend or default_backend()
        return be.dispatch(program, args, config) if stream is None else be.dispatch(program, args, config,
                                                                                     stream=stream)

    def _default_pipeline(self) -> Any:
        self._pipeline = default_backend().compile(self.program)
        return self._pipeline

    def compile(self, backend: Any = None, config: DispatchConfig | None = None,
                output_counts: Mapping[str, int] | None = None) -> Any:
        """A ``CompiledPipeline`` of this kernel on ``backend`` (default: the shared default backend).

        Its ``dispatch`` takes the inputs as a list; scalars must already be arrays or bytes
        (``kernel.inputs(...)`` converts them).
        """
        program = self.specialise(output_counts, config.elements if config else None)
        return (backend or default_backend()).compile(program, config)

    def dispatch_resident(self, handles: Sequence[Any], backend: Any = None, config: DispatchConfig | None = None,
                          output_counts: Mapping[str, int] | None = None) -> None:
        """Run on resident buffers: one handle per parameter, in order (results stay on the device)."""
        program = self.specialise(output_counts, config.elements if config else None)
        (backend or default_backend()).dispatch_resident(program, handles, config)

    def inputs(self, *values: Any) -> list[Any]:
        """The dispatch inputs for ``values``: scalars become 4-byte little-endian inputs."""
        return list(self._convert(values))

    def specialise(self, output_counts: Mapping[str, int] | None, elements: int | None = None) -> Program:
        """The program with every ``Out[T]`` output given its count (``output_counts``, else ``elements``)."""
        if not self._sized_later:
            return self.program
        counts = []
        for name in self._sized_later:
            n = (output_counts or {}).get(name, elements)
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise InvalidProgram(
                    f"output {name!r} of kernel {self.program.name or '<unnamed>'} is sized at dispatch and got "
                    f"{n!r} elements", f"pass output_counts={{{name!r}: n}} or elements=n with n >= 1.")
            counts.append(n)
        key = tuple(counts)
        program = self._specialised.get(key)
        if program is None:
            if len(self._specialised) >= 64:
                self._specialised.clear()
            program = with_output_counts(self.program, dict(zip(self._sized_later, counts)))
            self._specialised[key] = program
        return program

    def _convert(self, inputs: Sequence[Any]) -> list[Any]:
        """Scalars packed into 4-byte inputs; arrays of two or more dimensions and non-numbers refused."""
        args = list(inputs)
        for i, v in enumerate(args):
            if type(v) not in _PLAIN_NUMBERS and getattr(v, "ndim", 0) > 1 and i < len(self._names):
                raise InvalidProgram(
                    f"input {self._names[i]!r} of kernel {self.program.name or '<unnamed>'} is a "
                    f"{v.ndim}-D array of shape {tuple(v.shape)}; kernels take 1-D arrays (the result would come "
                    "back 1-D)", f"pass {self._names[i]}.ravel() and index it as row * width + column.")
        n = len(args)
        for i, pack, name, dtype in self._scalars:
            if i < n:  # a missing input is reported by the backend
                args[i] = _scalar(pack, name, dtype, args[i])
        return args


def _scalar(pack: Callable[[Any], bytes], name: str, dtype: DataType, v: Any) -> bytes:
    """``v`` as the 4-byte input of the scalar parameter ``name``: a number of the right kind, else an error."""
    if type(v) is float or type(v) is int:  # the common case, checked by the packer itself
        try:
            return pack(v)
        except (struct.error, OverflowError):
            pass
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, _BOOLS) and dtype is not DataType.BOOL:
        raise InvalidProgram(f"scalar parameter {name!r} is a {dtype.name} and got the bool {v!r}",
                             f"pass int({v!r}), or declare {name!r} as vyre.boolean.")
    if not (type(v) in _PLAIN_NUMBERS or isinstance(v, _NUMBERS) or isinstance(v, _BOOLS)):
        raise InvalidProgram(f"scalar parameter {name!r} got {_kind(v)}, not a number",
                             f"pass a Python or numpy number for {name!r}, or declare it as an array "
                             f"(vyre.In[vyre.{dtype.name.lower()}]) to pass an array.")
    try:
        return pack(v)
    except (struct.error, OverflowError, TypeError):
        return _scalar_bytes(name, dtype, v)


def _kind(v: object) -> str:
    """How an error names a value that is not a number: ``bytes``, ``a 1-D array of 8 float32``, ..."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return f"{type(v).__name__} {bytes(v)[:16]!r}"
    shape = getattr(v, "shape", None)
    if shape is not None:
        return f"an array of shape {tuple(shape)}"
    return f"a {type(v).__name__}"


def _scalar_bytes(name: str, dtype: DataType, v: Any) -> bytes:
    """The slow path of scalar conversion: F32 overflow rounds to inf, other misfits are errors."""
    if dtype in (DataType.F32, DataType.F64):
        value = float(v) if abs(v) < 2**1024 else (math.inf if v > 0 else -math.inf)  # ints beyond any float
        with np.errstate(over="ignore"):
            return dtype.np_dtype.type(value).tobytes()
    raise InvalidProgram(f"scalar parameter {name!r} is {v!r}, which is not a {dtype.name} ({_RANGES[dtype]})",
                         f"pass a value in range, or declare {name!r} with another scalar type.")


def _config(config: DispatchConfig | None, grid: Sequence[int] | None, elements: int | None) -> DispatchConfig:
    config = config or DispatchConfig()
    if grid is not None:
        config = replace(config, grid=tuple(grid))
    if elements is not None:
        config = replace(config, elements=elements)
    return config


def _workgroup(size: object, source: SourceFile, node: ast.AST | None) -> tuple[int, int, int]:
    wg = (size, 1, 1) if isinstance(size, int) and not isinstance(size, bool) else size
    if not isinstance(wg, tuple) or len(wg) != 3 or any(isinstance(v, bool) or not isinstance(v, int) for v in wg):
        raise source.error(node, f"workgroup_size={size!r} is not an int or a 3-tuple of ints",
                           "write workgroup_size=256 or workgroup_size=(16, 16, 1)", "workgroup_size_invalid")
    return wg


def _options(fn_name: str, workgroup_size: object, name: object, names: Mapping[str, str] | None,
             bindings: Mapping[str, int] | None, source: SourceFile, node: ast.AST | None) -> Options:
    name = fn_name if name is _FUNCTION_NAME else name
    if name is not None and not isinstance(name, str):
        raise source.error(node, f"name={name!r} is not a str", "write name=\"my_kernel\" or name=None")
    names, bindings = dict(names or {}), dict(bindings or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        raise source.error(node, "names= must map identifiers to IR names (str to str)", "write names={\"x\": \"x y\"}")
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in bindings.items()):
        raise source.error(node, "bindings= must map parameter names to ints", "write bindings={\"x\": 2}")
    return Options(_workgroup(workgroup_size, source, node), name, names, bindings)


def kernel(fn: Callable[..., Any] | None = None, *, workgroup_size: int | tuple[int, int, int] = 256,
           name: str | None | object = _FUNCTION_NAME, names: Mapping[str, str] | None = None,
           bindings: Mapping[str, int] | None = None) -> Any:
    """Decorate a function written in the kernel subset (docs/kernels.md); returns a ``Kernel``
    (a ``KernelTemplate`` when it has ``vyre.Const`` parameters).

    ``workgroup_size``: an int (x) or a 3-tuple. ``name``: the program's name (default: the
    function's; None for an unnamed program). ``names`` maps Python identifiers to IR names that
    are not identifiers, and ``bindings`` parameter names to bindings (default: their position);
    both exist so that any program can be printed as a kernel (``vyre.frontend.to_python``).
    """
    caller = sys._getframe(1)  # the scope that defines the kernel (a factory's locals: see enclosing_locals)

    def decorate(f: Callable[..., Any]) -> Kernel | KernelTemplate:
        try:
            source, fndef = function_source(f)
            options = _options(f.__name__, workgroup_size, name, names, bindings, source, fndef)
            enclosing = enclosing_locals(f, caller)
            namespace = namespace_of(f, enclosing)
            key = kernel_key(f, fndef, enclosing, options)
            return _kernel_or_template(source, fndef, namespace, options, f.__code__, key)
        except ValidationError as exc:
            raise exc.with_traceback(None) from None  # the finding names the user's line: skip our frames

    return decorate(fn) if fn is not None else decorate


@functools.cache
def _kernel_names() -> SimpleNamespace:
    """What ``vyre.`` names in kernel text: the kernel language (``vyre.frontend.lang``, whose names
    the package re-exports) and ``DispatchConfig``, without importing the package root."""
    from vyre.frontend import lang

    names = {name: getattr(lang, name) for name in dir(lang) if not name.startswith("_")}
    return SimpleNamespace(**names, DispatchConfig=DispatchConfig)


def kernel_from_source(text: str, filename: str = "<kernel>", namespace: Mapping[str, Any] | None = None
                       ) -> Kernel | KernelTemplate:
    """The ``Kernel`` of the one ``@vyre.kernel(...)`` function in ``text`` (no code is executed); a
    ``KernelTemplate`` when it has ``vyre.Const`` parameters.

    Free names resolve in ``namespace`` (default: just ``vyre``, the kernel language's names), then builtins.
    """
    ns = {"vyre": _kernel_names(), **(namespace or {})}
    source = SourceFile(filename)
    try:
        tree = ast.parse(text, filename)
    except SyntaxError as exc:
        raise ValidationError([Finding("syntax_error", f"{filename}:{exc.lineno}: {exc.msg}",
                                       "correct the Python syntax")]) from None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(defs) != 1:
        raise source.error(None, f"expected one kernel function, found {len(defs)}",
                           "pass the text of exactly one decorated def")
    fndef = defs[0]
    lookup = chain_lookup(ns)
    kwargs: dict[str, Any] = {}
    for deco in fndef.decorator_list:
        if isinstance(deco, ast.Call):
            kwargs.update({kw.arg: static_value(kw.value, lookup, source) for kw in deco.keywords if kw.arg})
    options = _options(fndef.name, kwargs.get("workgroup_size", 256), kwargs.get("name", _FUNCTION_NAME),
                       kwargs.get("names"), kwargs.get("bindings"), source, fndef)
    return _kernel_or_template(source, fndef, lookup, options)


def _kernel_or_template(source: SourceFile, fndef: ast.FunctionDef, namespace: Callable[[str], Any],
                        options: Options, code: Any = None, key: KernelKey | None = None) -> Kernel | KernelTemplate:
    """The lowered ``Kernel``, or with ``vyre.Const`` parameters a template lowering it per value;
    with a ``key`` (a kernel of the vyre package) the programs go through the specialisation cache."""
    params = const_params(fndef, namespace, source)

    def lower(values: Mapping[str, Any]) -> Program:
        return Lowering(source, fndef, namespace, options, code, values).program()

    template = KernelTemplate(lower, params, options.name, source, key)
    return template if params else template.bind()
