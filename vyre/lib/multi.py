"""``vyre.lib.multi``: one 1-D program, and library calls, over every device of a host.

The workgroups of the program's x range are divided into contiguous ranges, one per device.
Each device gets the elements of its range of every sharded buffer, the whole of every
replicated buffer and a zeroed copy of every reduced output (``vyre.ir.shard`` decides which is
which and refuses programs that do not survive the split). One thread per device uploads, runs
and downloads through the resident-buffer API of its own backend; sharded outputs are
concatenated in order and reduced outputs combined: with the backend's collective where its
registration offers one (``cuda``: an NCCL all-reduce, else peer copies and a sum on the first
device), else on the host with numpy. Host outputs are allocated once and every device
downloads its part straight into its slice (through its own pinned chunk ring on ``cuda``).

Inputs may also be ``Sharded`` values (or lists of per-device CuPy/torch arrays): each part is
the device's range already, nothing crosses the host, and the outputs come back in the same form.
With no reduced output these calls dispatch each device in turn from the calling thread, in
place on its parts and on its current stream, with no host wait (``CompiledMap``).

A call's setup (checks, split plan, per-device programs and configs, grid) depends only on the
program, ``reduce``, the config, the devices and the inputs' lengths and dtypes: it is made once
as a ``CompiledMap`` and kept (``CACHE_SIZE`` of them, least recently used dropped first;
``cache_info``), so a repeat call only binds the new arrays and launches. ``compile`` hands one
to the caller.

``reduce``, ``histogram``, ``inclusive_scan`` and ``sort`` (``vyre.lib.multi_ops``) build
multi-device library calls from the one-device ``vyre.lib`` functions.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.driver.config import DispatchConfig, effective_workgroup, resolve_grid
from vyre.driver.errors import InvalidProgram
from vyre.driver.inputs import as_bytes_view, check_byte_length, check_input_count
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.shard import SplitPlan, plan_split, shard_program
from vyre.lib.multi_devices import UFUNCS, backends_for
from vyre.lib.multi_devices import each as _each
from vyre.lib.sharded import (
    Sharded,
    as_sharded,
    download_into,
    empty_like,
    host_empty,
    is_device_array,
    owned_copy,
    put,
    residents,
    same_kind,
)


def as_program(kernel_or_program: object) -> Program:
    """A ``Program``, or the ``.program`` of a front-end kernel."""
    program = kernel_or_program if isinstance(kernel_or_program, Program) else getattr(kernel_or_program,
                                                                                      "program", None)
    if not isinstance(program, Program):
        raise InvalidProgram(f"{type(kernel_or_program).__name__} is neither a vyre.ir.Program nor a kernel "
                             "with a .program", "pass a Program or a @vyre.kernel function.")
    return program


def _check_reduce(reduce: object) -> None:
    """``reduce=`` maps output names to op names (``{"bins": "add"}``)."""
    if reduce is None:
        return
    if not isinstance(reduce, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in reduce.items()):
        raise InvalidProgram(f"reduce={reduce!r} is not a dict of output names to ops",
                             f'pass reduce={{"<output name>": "add"}} (ops: {", ".join(UFUNCS)}).')


# ---- the split --------------------------------------------------------------------------------------------
@dataclass
class _Spec:
    """What one device's part of a compiled call is, whatever the data: its backend, rewritten
    program and config, and per buffer (declaration order) where its data comes from."""

    backend: Any
    program: Program
    config: DispatchConfig
    sources: list[tuple[str, str, int, int]]  # per buffer: ("part"|"slice"|"whole"|"none", name, start, stop)
    sizes: list[int]  # bytes per buffer
    read_only: list[bool]  # per buffer: the program only reads it
    kept: list[np.dtype | None]  # per buffer: its dtype if it is a split output (or read_write) kept on the device

    def data(self, arrays: Mapping[str, np.ndarray], parts: Mapping[str, Sharded], k: int) -> list[Any]:
        """This call's data per buffer: part ``k`` of sharded inputs, slices and whole host arrays, None for outputs."""
        out: list[Any] = []
        for how, name, start, stop in self.sources:
            out.append(parts[name].parts[k] if how == "part" else arrays[name][start:stop] if how == "slice"
                       else arrays[name] if how == "whole" else None)
        return out


@dataclass
class _Shard:
    """One device's part of one call: its spec, this call's data, and the handles made for it."""

    spec: _Spec
    data: list[Any]  # per non-workgroup buffer: the input slice or device part, or None for outputs
    handles: list[Any] = field(default_factory=list)
    arrays: dict[int, Any] = field(default_factory=dict)  # kept outputs made as device arrays, by buffer

    @property
    def backend(self) -> Any:
        return self.spec.backend

    @property
    def sizes(self) -> list[int]:
        return self.spec.sizes

    def start(self) -> None:
        """Allocate, upload, dispatch (on the calling thread; the backend's own stream). Device
        parts the program only reads are read in place where the backend lends them (``cuda``)."""
        spec, res = self.spec, residents(self.spec.backend)
        try:
            for i, (data, nbytes, read_only) in enumerate(zip(self.data, spec.sizes, spec.read_only)):
                if res is not None and read_only and nbytes and is_device_array(data):
                    self.handles.append(res.lend(data))
                    continue
                dtype = spec.kept[i]
                if res is not None and dtype is not None and nbytes:  # written in place, handed to the caller
                    self.arrays[i], handle = res.new_lent(nbytes // dtype.itemsize, dtype)
                    self.handles.append(handle)
                    if data is not None:  # a read_write part: the caller's stays as it was
                        spec.backend.upload_resident(handle, data)
                    continue
                self.handles.append(spec.backend.allocate_resident(nbytes))
                if data is not None and nbytes:
                    spec.backend.upload_resident(self.handles[-1], data)
            spec.backend.dispatch_resident(spec.program, self.handles, spec.config)
        except BaseException:
            self.free()
            raise

    def download(self, index: int, dtype: np.dtype) -> np.ndarray:
        out = host_empty(self.backend, self.sizes[index] // dtype.itemsize, dtype)
        download_into(self.backend, self.handles[index], out)
        return out

    def owned(self, index: int, dtype: np.dtype) -> Any:
        """Buffer ``index`` as an array of the device that owns its memory (numpy on the oracle):
        the device array it was written into when there is one (after the backend's stream ran),
        else a copy of the handle."""
        if index in self.arrays:
            residents(self.backend).synchronize()
            return self.arrays[index]
        return owned_copy(self.backend, self.handles[index], dtype)

    def free(self) -> None:
        for handle in self.handles:
            try:
                self.backend.free_resident(handle)
            except Exception:  # noqa: BLE001 - freeing after a failure must not hide that failure
                pass
        self.handles = []


def split_workgroups(groups: int, parts: int) -> list[tuple[int, int]]:
    """``groups`` workgroups as at most ``parts`` contiguous non-empty ranges (one range when 0)."""
    parts = max(1, min(parts, groups))
    base, extra = divmod(groups, parts)
    ranges, start = [], 0
    for k in range(parts):
        stop = start + base + (k < extra)
        ranges.append((start, stop))
        start = stop
    return ranges


def map(kernel_or_program: object, inputs: Sequence[object], devices: Sequence[object] | None = None,
        reduce: Mapping[str, str] | None = None, *, config: DispatchConfig | None = None,
        stats: dict | None = None) -> list[Any]:
    """Run a 1-D program with its x range split over ``devices``; returns what one ``dispatch`` would.

    ``inputs`` are host arrays, one per read/read_write/uniform buffer in declaration order, or,
    for split buffers, ``Sharded`` values / lists of per-device arrays (then the devices are
    theirs, every part but the last holds a whole number of workgroups, and split outputs come
    back in the same form, reduced ones as an array of the first device).
    ``reduce`` names ``output`` buffers that are atomic accumulators and how to combine them
    (``{"bins": "add"}``; also min, max, or, and, xor). Programs that do not survive splitting are
    ``InvalidProgram`` with a ``Fix:``. ``stats``, when given, receives the devices, the
    workgroup ranges, how reduced outputs were combined (the collective's path, e.g. ``"nccl"``,
    ``"host"``, or ``"single"`` for one device), whether the compiled call came from the cache
    (``"compiled": "hit"`` or ``"miss"``) and how the devices ran (``"path"``: ``"direct"``, one
    dispatch per device in turn from the calling thread, or ``"resident"``, one thread per device
    through resident buffers; see ``CompiledMap``).

    Everything that depends only on the program, ``reduce``, the config, the devices and the
    inputs' lengths, dtypes and placement is computed once and kept (``cache_info``); a repeat
    call of that shape only binds the new arrays and launches.
    """
    program = as_program(kernel_or_program)
    call, bound = _lookup(program, inputs, devices, reduce, config, stats)
    return call.run(bound, stats)


def compile(kernel_or_program: object, inputs: Sequence[object], devices: Sequence[object] | None = None,
            reduce: Mapping[str, str] | None = None, *, config: DispatchConfig | None = None) -> CompiledMap:
    """``multi.map`` of ``kernel_or_program`` set up once for inputs shaped like ``inputs`` (their
    lengths, dtypes and devices; the data is not read): call the result with new inputs of that
    shape. ``multi.map`` keeps such objects itself (``cache_info``); this one is the caller's."""
    program = as_program(kernel_or_program)
    return _lookup(program, inputs, devices, reduce, config, None)[0]


@dataclass
class _Bound:
    """One call's inputs, read once: typed host views and sharded values by buffer name."""

    arrays: dict[str, np.ndarray]
    parts: dict[str, Sharded]
    as_list: bool
    shapes: tuple  # per input: its length and dtype (and its parts' devices and kinds)


@dataclass(eq=False)
class CompiledMap:
    """``multi.map`` of one program, ``reduce``, config, device list and shape of inputs, set up
    once (``multi.compile``); calling it with inputs of that shape binds them and launches.

    Sharded calls on backends that run dispatches in place on device arrays (``cuda``), with no
    reduced output, launch every device back to back from the calling thread, each on the current
    stream of its device (CuPy's, or torch's for torch parts), with no host wait: the returned
    arrays are ordered on those streams, as the one-device in-place dispatch's are. The rest run
    one thread per device through resident buffers, finished on return."""

    source: Program  # the program it was made from (as given)
    program: Program  # with the workgroup override folded in
    config: DispatchConfig
    plan: SplitPlan
    shapes: tuple  # of the inputs it takes (``_read``)
    backends: list[Any]
    ranges: list[tuple[int, int]]
    specs: list[_Spec]
    direct: bool  # one dispatch per device, in turn from the calling thread (see the class docstring)
    slots: tuple[int, ...] = ()  # per program input: its index among the non-workgroup buffers

    def __call__(self, inputs: Sequence[object], stats: dict | None = None) -> list[Any]:
        """Run on ``inputs`` (shaped as the ones this was compiled for)."""
        bound = _read(self.source, inputs)
        if bound.shapes != self.shapes:
            raise InvalidProgram("these inputs differ from the ones the compiled multi.map was made for "
                                 "(lengths, dtypes or devices)",
                                 "call multi.compile again for these inputs, or call multi.map (it keeps one "
                                 "compiled call per shape of inputs).")
        return self.run(bound, stats)

    @property
    def usable(self) -> bool:
        """False once a backend it runs on was shut down (the cache then compiles anew)."""
        return not any(getattr(b, "closed", False) for b in self.backends)

    def run(self, bound: _Bound, stats: dict | None) -> list[Any]:
        like = next(iter(bound.parts.values()), None)
        if self.direct and like is not None:
            outputs, how = self._direct(bound, like), None
        else:
            shards = [_Shard(spec, spec.data(bound.arrays, bound.parts, k)) for k, spec in enumerate(self.specs)]
            try:
                _each(shards, lambda s: s.start())
                outputs, how = _collect(self.program, self.plan, shards, like)
            finally:
                for shard in shards:
                    shard.free()
        if like is not None:
            outputs = [same_kind(o, bound.as_list) if isinstance(o, Sharded) else o for o in outputs]
        if stats is not None:
            stats.update(devices=[_name(b) for b in self.backends[:len(self.specs)]],
                         workgroup_ranges=list(self.ranges), reduction=how,
                         path="direct" if self.direct else "resident")
        return outputs

    def _direct(self, bound: _Bound, like: Sharded) -> list[Any]:
        """Every device's dispatch in turn (enqueued on its current stream on ``cuda``); split outputs as ``like``."""
        results = []
        for k, spec in enumerate(self.specs):
            data = spec.data(bound.arrays, bound.parts, k)
            results.append(_dispatch_part(spec, [data[i] for i in self.slots]))
        outputs: list[Any] = []
        for j, b in enumerate(self.program.outputs):
            pieces = [r[j] for r in results]
            idle = [empty_like(p, b.dtype.np_dtype) for p in like.parts[len(pieces):]]
            outputs.append(Sharded(pieces + idle, like.devices))
        return outputs


def _dispatch_part(spec: _Spec, inputs: list[Any]) -> list[Any]:
    """One device's dispatch, in place on a device backend (with its device current): read_write
    device parts are copied first (the caller's stay as they were), host inputs other than small
    read-only values are uploaded to new device arrays."""
    ops, raw = _device_ops_of(spec.backend)
    if ops is None:  # host parts on a backend without devices (the oracle): its dispatch copies every input
        return spec.backend.dispatch(spec.program, inputs, spec.config)

    def work() -> list[Any]:
        for j, decl in enumerate(spec.program.inputs):
            data = inputs[j]
            if is_device_array(data):
                if decl.access is Access.READ_WRITE:
                    inputs[j] = _fresh_copy(ops, raw.device_id, data)
            elif decl.access is Access.READ_WRITE or data.nbytes > _CARRIED_BYTES:
                inputs[j] = put(spec.backend, data)
        return spec.backend.dispatch(spec.program, inputs, spec.config)

    return ops.run_on(raw.device_id, work)


_CARRIED_BYTES = 256  # read-only host inputs up to this size go along with an in-place dispatch (cuda: 64 words)


def _fresh_copy(ops: Any, device: int, part: Any) -> Any:
    """A new device array equal to ``part``, made in its library's current-stream order (torch's
    ``clone``, else a CuPy copy)."""
    clone = getattr(part, "clone", None)
    return clone() if callable(clone) else ops.as_cupy(part, device).copy()


def _device_ops_of(backend: Any) -> tuple[Any, Any]:
    """The backend's operations on device arrays (``cuda``; else None) and the backend it wraps."""
    unwrap = getattr(backend, "unwrap", None)
    raw = unwrap() if callable(unwrap) else backend
    return getattr(raw, "device_arrays", None), raw


# ---- the cache of compiled calls ---------------------------------------------------------------------------
CACHE_SIZE = 32  # compiled calls kept by multi.map (the least recently used one is dropped first)
_calls: OrderedDict[tuple, CompiledMap] = OrderedDict()  # (program fingerprint, rest of the key) -> call
#: (id(program), rest) -> (program, its _calls key): the per-call lookup, which keeps the program alive
#: (so its id stays its own); an equal program built anew finds the call through its fingerprint
_by_id: dict[tuple, tuple[Program, tuple]] = {}
_cache_lock = threading.Lock()
_counts = {"hits": 0, "misses": 0}


def cache_info() -> dict[str, int]:
    """``multi.map``'s compiled calls: ``hits``, ``misses``, ``size`` (calls kept) and ``max_size``."""
    with _cache_lock:
        return {**_counts, "size": len(_calls), "max_size": CACHE_SIZE}


def cache_clear() -> None:
    """Drop every compiled call of ``multi.map`` and zero the counts."""
    with _cache_lock:
        _calls.clear()
        _by_id.clear()
        _counts.update(hits=0, misses=0)


def _lookup(program: Program, inputs: Sequence[object], devices: Sequence[object] | None,
            reduce: Mapping[str, str] | None, config: DispatchConfig | None, stats: dict | None
            ) -> tuple[CompiledMap, _Bound]:
    """The compiled call for this program and shape of inputs (from the cache, or made and kept):
    looked up by the program's identity, then by its fingerprint (an equal program built anew)."""
    _check_reduce(reduce)
    bound = _read(program, inputs)
    rest = (tuple(sorted(reduce.items())) if reduce else None, _config_key(config),
            None if devices is None else tuple(_device_key(d) for d in devices), bound.shapes)
    fast = (id(program), *rest)
    with _cache_lock:
        alias = _by_id.get(fast)
        key = alias[1] if alias is not None and alias[0] is program else None
    if key is None:
        key = (program.fingerprint(), *rest)
    with _cache_lock:
        call = _calls.get(key)
        hit = call is not None and call.usable
        if hit:
            _calls.move_to_end(key)
    if not hit:
        call = _build(program, bound, devices, reduce, config or DispatchConfig())
    assert call is not None
    with _cache_lock:
        _counts["hits" if hit else "misses"] += 1
        if not hit:
            _calls[key] = call
            while len(_calls) > CACHE_SIZE:
                _calls.popitem(last=False)
        if alias is None or alias[0] is not program:
            _by_id[fast] = (program, key)
            while len(_by_id) > 4 * CACHE_SIZE:
                del _by_id[next(iter(_by_id))]
    if stats is not None:
        stats["compiled"] = "hit" if hit else "miss"
    return call, bound


def _read(program: Program, inputs: Sequence[object]) -> _Bound:
    """Typed host views (no copy) cut to declared counts, the sharded inputs, and per input what a
    compiled call depends on: its length and dtype (and its parts' devices and kinds)."""
    check_input_count(program, inputs)
    arrays: dict[str, np.ndarray] = {}
    parts: dict[str, Sharded] = {}
    as_list = False
    shapes: list[tuple] = []
    for decl, data in zip(program.inputs, inputs):
        sharded, listed = as_sharded(data)
        if sharded is not None:
            parts[decl.name] = sharded
            as_list = as_list or listed
            shapes.append((tuple(sharded.sizes), str(sharded.parts[0].dtype),
                           tuple(_device_key(d) for d in sharded.devices),
                           tuple(is_device_array(p) for p in sharded.parts)))
            continue
        if is_device_array(data):
            raise InvalidProgram(f"input for buffer {decl.name!r} is a single device array; multi.map shards host "
                                 "arrays or takes one array per device",
                                 "pass a host array (CuPy: x.get()), or multi.Sharded([part0, part1, ...]) / a list "
                                 "of per-device arrays.")
        view = as_bytes_view(decl, data)
        count = check_byte_length(decl, view.nbytes)
        arrays[decl.name] = np.frombuffer(view, dtype=decl.dtype.np_dtype, count=count)
        shapes.append((count,))
    return _Bound(arrays, parts, as_list, tuple(shapes))


def _device_key(device: object) -> object:
    """A device of ``devices=`` or of a ``Sharded`` as part of a cache key (ids by value, others by identity)."""
    if isinstance(device, str):
        return device
    ident = getattr(device, "id", None)
    return ident if isinstance(ident, str) and not hasattr(device, "dispatch") else ("object", id(device))


def _config_key(config: DispatchConfig | None) -> object:
    try:
        hash(config)
    except TypeError:
        return ("object", id(config))
    return config


def _build(program: Program, bound: _Bound, devices: Sequence[object] | None,
           reduce: Mapping[str, str] | None, config: DispatchConfig) -> CompiledMap:
    """Everything of a call that does not depend on the data: checks, split, per-device programs."""
    from vyre.ir.validate import validate

    validate(program)
    folded, config = _fold_workgroup(program, config)
    plan = plan_split(folded, reduce)
    parts, like = bound.parts, None
    for decl in folded.inputs:
        if decl.name in parts:
            like = _check_sharded(decl, parts[decl.name], plan, like)
    lengths = {name: arr.size for name, arr in bound.arrays.items()}
    lengths.update({name: sh.size for name, sh in parts.items()})
    lengths.update(_output_counts(folded, config, lengths))
    grid = resolve_grid(folded, config, lengths)
    if grid[1] != 1 or grid[2] != 1:
        raise InvalidProgram(f"grid {grid} is not 1-D; multi.map splits the x range only",
                             "give a grid of (gx, 1, 1), or run the program on one device.")
    if like is not None:
        if devices is not None and len(devices) != len(like.parts):
            raise InvalidProgram(f"devices= names {len(devices)} devices but the sharded inputs have "
                                 f"{len(like.parts)} parts", "leave devices=None: sharded inputs bring their own.")
        backends = backends_for(like.devices)
        ranges = _part_ranges(like.sizes, folded.workgroup_size[0], grid[0])
    else:
        backends = backends_for(devices)
        ranges = split_workgroups(grid[0], len(backends))
    specs = [_make_spec(folded, plan, config, set(parts), lengths, backends[k], ranges[k], k == len(ranges) - 1)
             for k in range(len(ranges))]
    direct = like is not None and not plan.reduced and all(
        all(is_device_array(sh.parts[k]) == (_device_ops_of(spec.backend)[0] is not None) for sh in parts.values())
        for k, spec in enumerate(specs))
    if direct:
        specs = [dataclasses.replace(s, config=dataclasses.replace(s.config, outputs="auto")) for s in specs]
    names = [b.name for b in folded.buffers if not b.is_workgroup]
    return CompiledMap(program, folded, config, plan, bound.shapes, backends, ranges, specs, direct,
                       tuple(names.index(b.name) for b in folded.inputs))


def _name(backend: Any) -> str:
    """``cuda:1`` for a backend on a numbered device, else its id."""
    device = getattr(backend, "device_id", None)
    return f"{backend.id}:{device}" if isinstance(device, int) else str(getattr(backend, "id", "?"))


def _fold_workgroup(program: Program, config: DispatchConfig) -> tuple[Program, DispatchConfig]:
    """Apply ``workgroup_override`` to the program; refuse what cannot span devices."""
    if config.cooperative:
        raise InvalidProgram("a cooperative dispatch cannot span devices (its workgroups must be co-resident)",
                             "run cooperative programs on one device.")
    wg = effective_workgroup(program, config)
    if wg[1] != 1 or wg[2] != 1:
        raise InvalidProgram(f"workgroup size {wg} has y or z > 1; multi.map splits 1-D programs only",
                             "use a workgroup size of (x, 1, 1), or run the program on one device.")
    if config.workgroup_override is not None:
        program = Program(program.buffers, wg, program.body, name=program.name)
        config = dataclasses.replace(config, workgroup_override=None)
    return program, config


def _check_sharded(decl: BufferDecl, sharded: Sharded, plan: SplitPlan, like: Sharded | None) -> Sharded:
    """A sharded input must feed a split buffer, with its dtype, and line up with the other ones."""
    if decl.name not in plan.sharded:
        raise InvalidProgram(f"buffer {decl.name!r} is read at other indices than the own one, so every device needs "
                             "all of it, but it was given sharded", f"pass {decl.name!r} as one host array.")
    if sharded.dtype != decl.dtype.np_dtype:
        raise InvalidProgram(f"sharded input for buffer {decl.name!r} holds {sharded.dtype}, not "
                             f"{decl.dtype.np_dtype}", f"cast every part with .astype({decl.dtype.np_dtype.name!r}).")
    if decl.count and sharded.size != decl.count:
        raise InvalidProgram(f"sharded input for buffer {decl.name!r} has {sharded.size} elements; the buffer "
                             f"declares {decl.count}", "give the sharded input exactly the declared count.")
    if like is not None and (sharded.sizes != like.sizes or len(sharded.devices) != len(like.devices)):
        raise InvalidProgram(f"sharded input for buffer {decl.name!r} has parts of {sharded.sizes} elements, "
                             f"another sharded input {like.sizes}", "split every sharded input the same way "
                             "(multi.shard(x, devices) does).")
    return sharded


def _part_ranges(sizes: Sequence[int], wgx: int, groups: int) -> list[tuple[int, int]]:
    """The workgroup range of each non-empty part up to the last one (empty parts after it run
    nothing); every part before the last non-empty one is whole workgroups."""
    used = max((k + 1 for k, size in enumerate(sizes) if size), default=1)
    ranges, start = [], 0
    for k, size in enumerate(sizes[:used]):
        last = k == used - 1
        if not last and size % wgx:
            raise InvalidProgram(f"part {k} of a sharded input has {size} elements, not a multiple of the workgroup "
                                 f"size {wgx}", f"make every part but the last a multiple of {wgx} "
                                 f"(multi.shard(x, devices, align={wgx})).")
        lo, hi = start // wgx, max(groups, start // wgx) if last else (start + size) // wgx
        if hi > groups:
            raise InvalidProgram(f"the grid has {groups} workgroups, fewer than the parts before the last sharded "
                                 f"part cover ({hi})", "leave the grid to the buffers (no grid= or elements=), or "
                                 "shard only the invocations the grid runs.")
        ranges.append((lo, hi))
        start += size
    return ranges


def _output_counts(program: Program, config: DispatchConfig, lengths: Mapping[str, int]) -> dict[str, int]:
    sized = getattr(config, "output_counts", None) or {}
    counts = {}
    for b in program.buffers:
        if b.access is Access.OUTPUT:
            count = b.count or sized.get(b.name) or config.elements
            if not count:
                raise InvalidProgram(f"output buffer {b.name!r} has no element count",
                                     f"declare its count, or pass DispatchConfig(output_counts={{{b.name!r}: n}}).")
            counts[b.name] = count
    return counts


def _make_spec(program: Program, plan: SplitPlan, config: DispatchConfig, part_names: set[str],
               lengths: Mapping[str, int], backend: Any, groups: tuple[int, int], last: bool) -> _Spec:
    """Device ``k``'s program, config and buffers (its slice of split host inputs, its own part of
    sharded ones, whole replicated inputs, zeroed reduced outputs)."""
    wgx = program.workgroup_size[0]
    lo, hi = groups[0] * wgx, groups[1] * wgx
    sources: list[tuple[str, str, int, int]] = []
    sizes: list[int] = []
    read_only: list[bool] = []
    kept: list[np.dtype | None] = []
    out_counts: dict[str, int] = {}
    for b in program.buffers:
        if b.is_workgroup:
            continue
        length = lengths[b.name]
        if b.name in plan.sharded:
            start, stop = min(lo, length), (length if last else min(hi, length))
            count = stop - start
            if b.access is Access.OUTPUT:
                if count == 0:
                    raise InvalidProgram(
                        f"output buffer {b.name!r} has {length} elements, none of them in the range of the device "
                        f"that runs invocations from {lo}", f"give {b.name!r} one element per invocation, name it "
                        "in reduce=, or pass fewer devices.")
                out_counts[b.name] = count
            how = "part" if b.name in part_names else "slice" if b.access.is_input else "none"
            sources.append((how, b.name, start, stop))
        else:
            count = length
            sources.append(("whole" if b.access.is_input else "none", b.name, 0, 0))  # replicated, or reduced
        sizes.append(count * b.dtype.size)
        read_only.append(b.access is Access.READ)
        kept.append(b.dtype.np_dtype if part_names and b.access in (Access.OUTPUT, Access.READ_WRITE)
                    and b.name in plan.sharded else None)
    shard = shard_program(program, plan, lo, lengths, out_counts)
    extra = {"output_counts": None} if hasattr(config, "output_counts") else {}
    shard_config = dataclasses.replace(config, grid=(groups[1] - groups[0], 1, 1), elements=None, **extra)
    return _Spec(backend, shard, shard_config, sources, sizes, read_only, kept)


def _collect(program: Program, plan: SplitPlan, shards: Sequence[_Shard], like: Sharded | None
             ) -> tuple[list[Any], str | None]:
    """Combine reduced outputs, fetch everything, and assemble the outputs in declaration order.

    Host mode (``like`` None): split outputs are allocated once and each device downloads into
    its own slice. Sharded mode (``like``: a sharded input): split outputs stay on their devices
    as a ``Sharded`` like it, of arrays that own their memory (empty ones where a part ran nothing)."""
    decls = [b for b in program.buffers if not b.is_workgroup]
    index = {b.name: k for k, b in enumerate(decls)}
    on_device = {name: _device_reduce(shards, index[name], _decl(decls, name), op)
                 for name, op in plan.reduced} if len(shards) > 1 else {name: "single" for name, _ in plan.reduced}
    paths = set(on_device.values())
    how = None if not paths else ("host" if None in paths else "+".join(sorted(p for p in paths if p)))
    split = [b for b in program.outputs if b.name in plan.sharded]
    whole: dict[str, np.ndarray] = {}
    if like is None:
        for b in split:
            count = sum(s.sizes[index[b.name]] for s in shards) // b.dtype.size
            whole[b.name] = host_empty(shards[0].backend, count, b.dtype.np_dtype)

    def fetch(k: int) -> dict[str, Any]:
        shard, got = shards[k], {}
        for b in program.outputs:
            i, dtype = index[b.name], b.dtype.np_dtype
            if b.name in whole:
                start, stop = (sum(s.sizes[i] for s in shards[:j]) // b.dtype.size for j in (k, k + 1))
                download_into(shard.backend, shard.handles[i], whole[b.name][start:stop])
            elif b.name in plan.sharded or (on_device[b.name] and k == 0):
                got[b.name] = shard.owned(i, dtype) if like is not None else shard.download(i, dtype)
            elif not on_device[b.name]:
                got[b.name] = shard.download(i, dtype)
        return got

    parts = _each(range(len(shards)), fetch)
    outputs: list[Any] = []
    for b in program.outputs:
        pieces = [p[b.name] for p in parts if b.name in p]
        if b.name in whole:
            outputs.append(whole[b.name])
        elif b.name in plan.sharded:
            idle = [empty_like(p, b.dtype.np_dtype) for p in like.parts[len(pieces):]]
            outputs.append(Sharded(pieces + idle, like.devices))
        elif on_device[b.name]:
            outputs.append(pieces[0])
        else:
            outputs.append(UFUNCS[plan.reduce_ops[b.name]].reduce(np.stack(pieces), axis=0, dtype=b.dtype.np_dtype))
    return outputs, how


def _decl(decls: Sequence[BufferDecl], name: str) -> BufferDecl:
    return next(b for b in decls if b.name == name)


def _device_reduce(shards: Sequence[_Shard], index: int, decl: BufferDecl, op: str) -> str | None:
    """Combine one reduced output into the first shard's buffer with the backends' own collective.

    Returns the collective's path name, or None when the backends offer none (then the host combines).
    """
    from vyre.driver.registry import registration

    ids = {getattr(s.backend, "id", None) for s in shards}
    only = ids.pop() if len(ids) == 1 else None
    reg = registration(only) if only is not None else None
    if reg is None or reg.all_reduce is None:
        return None
    return reg.all_reduce([s.backend for s in shards], [s.handles[index] for s in shards], decl.dtype.np_dtype, op)


from vyre.lib.multi_ops import histogram, inclusive_scan, reduce, shard, sort  # noqa: E402 - they use map's helpers

__all__ = ["CACHE_SIZE", "CompiledMap", "Sharded", "as_program", "backends_for", "cache_clear", "cache_info", "compile",
           "histogram", "inclusive_scan", "map", "reduce", "shard", "sort", "split_workgroups"]
