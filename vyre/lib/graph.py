"""Graph workloads on any backend: breadth-first search and connected components over CSR graphs.

Both run as IR programs on resident buffers, so the oracle checks them and ``cuda`` runs them as
kernels. A graph is CSR: ``indptr`` (n + 1 u32 offsets) and ``indices`` (u32 neighbour ids);
neighbour ids ``>= n`` are ignored.

- ``bfs``: level-synchronous and direction-optimising, the level loop on the device
  (``dispatch_until``; the steps and the control words are in ``graph_kernels``): top-down over a
  compacted frontier (an atomic counter appends newly reached vertices), bottom-up steps (every
  unreached vertex looks for a parent in the current level) while the frontier is large, when the
  graph is undirected. Only the levels are read back. The oracle searches on the host instead
  (``ReferenceBackend.host_bfs``, on by default: its per-level interpretation would take minutes on
  long searches), giving the same levels; with ``host_bfs`` off it interprets the IR programs.
- ``connected_components``: union-find that hooks the larger of two different roots under the
  smaller (the programs are in ``graph_cc``). ``method="afforest"`` (default): each vertex links
  two sampled neighbours, a device-side vote over 1,024 vertices picks the giant component, and
  (on graphs stored both ways) only the vertices outside it link the rest of their neighbours;
  ``method="sweep"`` (ECL-CC): every edge is hooked, then every vertex jumps to its root. The last
  steps loop on the device with ``dispatch_until`` until nothing is left; the labels are then each
  component's smallest vertex.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram, UnsupportedFeature
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lib import graph_cc as cc
from vyre.lib import graph_kernels as kernels
from vyre.lib.graph_cc import jump_program as jump_program  # egraph's compression
from vyre.lib.plan import capacity
from vyre.lib.scratch import ScratchCache, raw_backend, scratch_for

U32 = DataType.U32
UNREACHED = 0xFFFFFFFF
_WG = 256


def backend_or_default(backend: object | None) -> Any:
    """``backend=`` of a workload: None (the shared default), a backend id string, or a started backend."""
    from vyre.lib.scratch import resolve_backend

    return resolve_backend(backend)


CC_METHODS = ("afforest", "sweep")  # Graph.connected_components' methods (graph_cc has their programs)
MAX_IDS = 1 << 30  # vertices of from_edges, e-class ids of egraph: arrays of this many ids are made on the host


def u32_array(name: str, values: object, backend: object | None = None) -> Any:
    """``values`` as a contiguous 1-D u32 array, checked: numpy for host data; for a device array
    (CuPy, torch, anything with ``__cuda_array_interface__``) a CuPy array on ``backend``'s device
    (``backend.as_cupy``: the caller's memory, converted on the device only when not u32), so
    graphs given as device arrays never cross to the host."""
    from vyre.lib.io import device_array_info

    if device_array_info(values) is not None:
        return _device_u32(name, values, backend)
    array = np.asarray(values)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise InvalidProgram(f"{name} must be a 1-D integer array, got shape {array.shape} dtype {array.dtype}",
                             "pass a 1-D numpy array of vertex ids or offsets.")
    narrow = array.dtype.itemsize <= 4  # no value of a 4-byte (or narrower) type exceeds u32
    if array.size and not (narrow and array.dtype.kind == "u"):  # one scan of (maybe 10**8) values at most
        if array.min() < 0 or (not narrow and array.max() > UNREACHED):
            raise InvalidProgram(f"{name} holds values outside u32", "pass ids and offsets in [0, 2**32).")
    if array.dtype.itemsize == 4:  # i32 (scipy's CSR) with no negative value is the same bits as u32: no copy,
        return np.ascontiguousarray(array).view(np.uint32)  # so the caller's array is what crosses the link
    return np.ascontiguousarray(array, dtype=np.uint32)


def _device_u32(name: str, values: object, backend: object | None) -> Any:
    as_cupy = getattr(backend_or_default(backend), "as_cupy", None)
    if as_cupy is None:
        raise UnsupportedFeature(f"device arrays as graph input ({name})", getattr(backend, "id", "?"),
                                 "pass numpy arrays, or use a backend that binds device arrays (cuda).")
    array = as_cupy(values)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise InvalidProgram(f"{name} must be a 1-D integer array, got shape {array.shape} dtype {array.dtype}",
                             "pass a 1-D device array of vertex ids or offsets.")
    if array.dtype == np.uint32:
        return array
    if array.size and (int(array.min()) < 0 or int(array.max()) > UNREACHED):
        raise InvalidProgram(f"{name} holds values outside u32", "pass ids and offsets in [0, 2**32).")
    if array.dtype.itemsize == 4:  # i32 with no negative value: the same bits, the caller's memory
        return array.view(np.uint32)
    return array.astype(np.uint32)  # a new array, on the device


def host_copy(array: Any) -> np.ndarray:
    """A numpy copy of a numpy or CuPy array (for error messages and host-side checks only)."""
    get = getattr(array, "get", None)
    return np.asarray(get() if callable(get) else array)


def check_csr(indptr: object, indices: object, backend: object | None = None) -> tuple[Any, Any]:
    """``indptr`` and ``indices`` as u32 arrays (numpy, or CuPy for device input), checked to be a CSR graph."""
    ptr, idx = u32_array("indptr", indptr, backend), u32_array("indices", indices, backend)
    if ptr.size == 0:
        raise InvalidProgram("indptr is empty", "pass n + 1 offsets (np.zeros(1) for a graph of no vertices).")
    if int(ptr[0]) != 0 or bool((ptr[1:] < ptr[:-1]).any()) or int(ptr[-1]) != idx.size:
        raise InvalidProgram("indptr is not a CSR offset array (starts at 0, never decreases, ends at len(indices))",
                             "build the graph with vyre.lib.graph.from_edges or scipy.sparse.csr_matrix(...).indptr.")
    return ptr, idx


def check_symmetric(ptr: np.ndarray, idx: np.ndarray) -> None:
    """Refuse a CSR graph with an edge ``v -> u`` (``u < n``) whose ``u -> v`` is not stored (``undirected=True``)."""
    n = ptr.size - 1
    src = np.repeat(np.arange(n, dtype=np.uint64), np.diff(ptr).astype(np.int64))
    dst = idx.astype(np.uint64)
    kept = dst < n  # ids >= n are ignored by every traversal
    forward = np.unique((src[kept] << np.uint64(32)) | dst[kept])
    backward = np.unique((dst[kept] << np.uint64(32)) | src[kept])
    missing = np.setdiff1d(forward, backward, assume_unique=True)
    if missing.size:
        v, u = int(missing[0]) >> 32, int(missing[0]) & 0xFFFFFFFF
        raise InvalidProgram(
            f"undirected=True, but edge {v} -> {u} is not stored both ways ({u} -> {v} is missing; "
            f"{missing.size} edges lack their reverse), which would give wrong levels",
            "store every edge both ways (graph.from_edges(n, np.concatenate([src, dst]), np.concatenate([dst, src]))), "
            "or pass undirected=False.")


@cache
def edge_pairs_program() -> Program:
    """``(out_s[e], out_d[e])`` = edge ``e`` as ``(v, u)``; an ignored neighbour (``u >= n``) becomes
    ``(v, v)``, a self loop, which is its own reverse."""
    e = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read("sources", 1, U32), BufferDecl.read("indices", 2, U32),
         BufferDecl.read_write("out_s", 3, U32), BufferDecl.read_write("out_d", 4, U32)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(e, Expr.buf_len("out_s")), [
            Node.let("v", Expr.load("sources", e)),
            Node.let("u", Expr.load("indices", e)),
            Node.store("out_s", e, V("v")),
            Node.store("out_d", e, Expr.select(Expr.lt(V("u"), Expr.buf_len("indptr") - 1), V("u"), V("v"))),
        ])],
        name="graph_edge_pairs",
    )


@cache
def pairs_differ_program() -> Program:
    """``flag = 1`` if pair ``i`` of relation A differs from pair ``i`` of relation B (``i < len(a_s)``)."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("a_s", 0, U32), BufferDecl.read("a_d", 1, U32), BufferDecl.read("b_s", 2, U32),
         BufferDecl.read("b_d", 3, U32), BufferDecl.read("count", 4, U32, 1), BufferDecl.read_write("flag", 5, U32, 1)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.load("count", Expr.u32(0))), [
            Node.if_(Expr.or_(Expr.ne(Expr.load("a_s", i), Expr.load("b_s", i)),
                              Expr.ne(Expr.load("a_d", i), Expr.load("b_d", i))),
                     [Node.store("flag", Expr.u32(0), Expr.u32(1))]),
        ])],
        name="graph_pairs_differ",
    )


class ResidentSet:
    """Resident buffers of one backend that are freed together (``close()`` or ``with``)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.handles: list[Any] = []
        self._roles: dict[str, Any] = {}  # role -> the handle ``borrow`` re-points per call

    def upload(self, array: np.ndarray) -> Any:
        """A new handle holding ``array``'s bytes (at least 4 bytes, so empty arrays get a handle too)."""
        handle = self.alloc(max(array.nbytes, 4))
        if array.nbytes:
            self.backend.upload_resident(handle, array)
        return handle

    def bind(self, array: Any) -> Any:
        """A handle over the device ``array``'s own memory (``backend.borrow``: no copy; an empty array
        gets a 4-byte handle of its own, as ``upload`` gives). Freeing it leaves the array alone; the
        caller keeps ``array`` alive while the handle is used."""
        if not array.nbytes:
            return self.alloc(4)
        handle = self.backend.borrow(None, array)
        self.handles.append(handle)
        return handle

    def alloc(self, nbytes: int) -> Any:
        """A new handle of ``nbytes``."""
        handle = self.backend.allocate_resident(nbytes)
        self.handles.append(handle)
        return handle

    def borrow(self, role: str, array: Any) -> Any:
        """The handle of ``role`` pointed at the device ``array`` (``backend.borrow``): one handle per
        role, re-pointed on every call and freed with the set (``ScratchCache.borrow``'s contract)."""
        old = self._roles.get(role)
        handle = self.backend.borrow(old, array)
        if handle is not old:
            self.handles.append(handle)
            self._roles[role] = handle
        return handle

    def adopt(self, *handles: object) -> None:
        """Free ``handles`` (made elsewhere, e.g. by a library call) with the rest."""
        self.handles.extend(handles)

    def close(self) -> None:
        handles, self.handles = self.handles, []
        self._roles.clear()
        for handle in handles:
            self.backend.free_resident(handle)

    def __enter__(self) -> ResidentSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_Arrays = TypeVar("_Arrays", bound="DeviceArrays")


class DeviceArrays:
    """Arrays on one backend, freed together (``close()`` or ``with``): host arrays are uploaded; with
    ``in_place`` on a backend that binds device arrays (``cuda``), device arrays are bound where
    they are (``ResidentSet.bind``, no copy) and referenced until ``close`` (``bound``)."""

    def __init__(self, backend: object | None, arrays: Sequence[Any], *, in_place: bool = False,
                 shared: ScratchCache | None = None) -> None:
        self.backend = backend_or_default(backend)
        self._res = ResidentSet(self.backend)
        self.shared = shared  # vyre.lib's scratch: where a one-call graph borrows (``one_call``)
        on_device = [not isinstance(a, np.ndarray) for a in arrays]
        self.bound: tuple[Any, ...] = tuple(arrays) if in_place and any(on_device) and binds(self.backend) else ()
        try:
            self.handles = [self._bind(k, a) if self.bound and device else self._res.upload(a)
                            for k, (a, device) in enumerate(zip(arrays, on_device, strict=True))]
        except BaseException:
            self.close()
            raise

    def _bind(self, k: int, array: Any) -> Any:
        """A handle over the ``k``-th device array: the shared scratch's handle of that role
        (re-pointed, kept) for a one-call graph, else a handle of this set's own."""
        if self.shared is not None and array.nbytes:
            return self.shared.borrow(f"graph.array{k}", array)
        return self._res.bind(array)

    def close(self) -> None:
        """Free the device buffers (handles over bound arrays are released; the arrays stay the caller's)."""
        self._res.close()
        self.bound = ()

    def __enter__(self: _Arrays) -> _Arrays:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def binds(backend: Any) -> bool:
    """Whether ``backend`` binds the caller's device arrays in place (``vyre.lib``'s test: ``cuda``)."""
    return scratch_for(backend).abilities()[1]


def read_u32(backend: Any, handle: Any, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=np.uint32)
    return backend.download_resident(handle, 0, 4 * count).view(np.uint32)


def _word(data: np.ndarray) -> int:
    return int(np.asarray(data).view(np.uint32)[0])


# ---- shared pieces -------------------------------------------------------------------------------
V = Expr.var
ONE_INVOCATION = DispatchConfig(grid=(1, 1, 1))
LEVELS_PER_TEST = 2  # BFS levels in each iteration of the device loop (each iteration ends with a WHILE test)
_LANES_SHIFTS = kernels.SHIFT_RANGE


def lanes_shift(vertices: int, average_degree: float = 0.0) -> int:
    """log2 of the invocations per vertex: about ``average_degree`` within 32..32768 (so a hub in a
    small frontier is spread over many invocations), fewer only if ``vertices`` times it would pass 2**31."""
    low, high = _LANES_SHIFTS
    shift = min(max((math.ceil(average_degree) - 1).bit_length(), low), high)
    while shift and vertices << shift >= 1 << 31:
        shift -= 1
    return shift


@cache
def edge_sources_program(shift: int) -> Program:
    """``sources[e]`` = the vertex whose row holds edge ``e`` (the CSR's row ids, COO style)."""
    v = Expr.invocation_id(0) >> shift
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read_write("sources", 1, U32)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(v, Expr.buf_len("indptr") - 1), [
            Node.let("v", v),
            *kernels.strided_edges(V("v"), Expr.invocation_id(0) & ((1 << shift) - 1), Expr.u32(shift),
                                   [Node.store("sources", V("e"), V("v"))]),
        ])],
        name=f"edge_sources_x{1 << shift}",
    )


@cache
def clear_program() -> Program:
    """``flag[0] = 0``."""
    return Program([BufferDecl.read_write("flag", 0, U32, 1)], (1, 1, 1),
                   [Node.store("flag", Expr.u32(0), Expr.u32(0))], name="clear_flag")


def device_lanes(backend: Any, n: int) -> int:
    """Invocations of a BFS step's fixed grid: as many as the device holds at once (2048 per SM), or 1024
    where the backend gives no SM count (the oracle, which runs lanes as numpy vectors); fewer for a
    small graph (32 per vertex, rounded up to whole workgroups)."""
    sm_count = backend.device_profile().get("sm_count")
    most = int(sm_count) * 2048 if sm_count else 1024
    return max(kernels.WG, min(most, capacity(max(n, 1) << 5)))


class Graph(DeviceArrays):
    """A CSR graph resident on one backend: upload once, run many traversals, ``close()`` when done.

    ``undirected=True`` promises that every edge is stored both ways (checked on the device, refused with
    a Fix if not): BFS may then run bottom-up steps, and components look at each edge once.

    Device arrays (CuPy, torch) on a backend that binds them (``cuda``) are not copied: the graph
    reads the caller's memory in place (an int64 array is converted once, on the device, into an
    array the graph owns) and keeps the arrays referenced until ``close``; do not change them
    while the graph is open. Results are then new arrays of the caller's kind, copied on the
    device in the caller's current stream's order (``like``); host input gives numpy results.
    """

    def __init__(self, indptr: object, indices: object, *, backend: object | None = None,
                 undirected: bool = False, shared: ScratchCache | None = None) -> None:
        ptr, idx = check_csr(indptr, indices, backend)
        self.n, self.m = ptr.size - 1, idx.size
        self.undirected = undirected
        self._scratch: dict[str, object] = {}
        self._copied = False  # a result was copied on a caller's stream since the last ordering
        self._loops: dict[object, Any] = {}  # the backend's compiled loops (``compile_until``): BFS, components
        super().__init__(backend, [ptr, idx], in_place=True, shared=shared)
        self.like = tuple(given for given, checked in ((indptr, ptr), (indices, idx))
                          if self.bound and not isinstance(checked, np.ndarray))
        self.indptr_handle, self.indices_handle = self.handles
        self._lanes = device_lanes(self.backend, self.n)
        try:
            self.after_caller()
            if undirected and not self.stored_both_ways():
                check_symmetric(host_copy(ptr), host_copy(idx))  # names a one-way edge, in an error with a Fix
        except BaseException:
            self.close()
            raise

    def stored_both_ways(self) -> bool:
        """Whether every edge's reverse is stored too (as sets: duplicates and ids ``>= n`` do not count).

        On the device: the edges and the reversed edges become sorted, distinct relations (Datalog's
        sort and dedup operators), which must be equal; three words are read back.
        """
        from vyre.lib import datalog
        from vyre.lib.plan import Plan

        if self.m == 0:
            return True
        be, m = self.backend, self.m
        ev = datalog.Evaluator(be)
        with ResidentSet(be) as res, ev.scratch.lock:
            src, dst, flag = res.alloc(4 * m), res.alloc(4 * m), res.upload(np.zeros(1, np.uint32))
            be.dispatch_sequence([(edge_pairs_program(), [self.indptr_handle, self.edge_sources(), self.indices_handle,
                                                         src, dst], _elements_config(m))])
            empty = datalog.Relation(be, 0)
            res.handles += [empty.src, empty.dst]
            relations = []
            try:
                for a, b in ((src, dst), (dst, src)):
                    relations.append(ev.fresh(Plan(be, ev.scratch), a, b, m, empty))
                forward, backward = relations
                if forward.size != backward.size:
                    return False
                count = res.upload(np.array([forward.size], np.uint32))
                (word,) = be.dispatch_sequence([(pairs_differ_program(), [forward.src, forward.dst, backward.src,
                                                                          backward.dst, count, flag],
                                                 _elements_config(forward.size))], reads=[(flag, 0, 4)])
                return _word(word) == 0
            finally:
                for relation in relations:
                    relation.close()

    def after_caller(self) -> None:
        """Order the backend's next work after everything queued so far on the caller's current
        stream (where the bound arrays were written; an event, no host wait). Host graphs: nothing."""
        if self.like:
            self.backend.enqueue_sequence([], stream=self.caller_stream())

    def caller_stream(self) -> Any:
        """The caller's current stream for the bound arrays (None: a host graph)."""
        return raw_backend(self.backend).stream_for(None, self.like) if self.like else None

    def result(self, handle: Any, count: int) -> Any:
        """The first ``count`` u32 words of the scratch ``handle``: numpy for a host graph, else a new
        array of the caller's kind (``backend.new_array``) written by a device copy enqueued on the
        caller's current stream, which waits for the traversal first (``enqueue_sequence`` orders
        it); never through the host."""
        be = self.backend
        if not self.like:
            return read_u32(be, handle, count)
        raw = raw_backend(be)
        out = raw.new_array(self.like, U32, count, None)
        if count:
            target = (self.shared if self.shared is not None else self._res).borrow("graph.result", out)
            be.enqueue_sequence([(copy_program(), [handle, target], _elements_config(count))],
                                stream=raw.stream_for(None, self.like))
            self._copied = True
        return out

    def close(self) -> None:
        """Free the graph's buffers (after any result copy still queued on a caller's stream)."""
        try:
            self._loops.clear()
            if self._copied:
                self._copied = False
                self.backend.enqueue_sequence([])  # the backend's stream waits for the copies: scratch is reusable
        finally:
            super().close()

    def scratch(self, name: str, nbytes: int) -> Any:
        """The graph's own resident buffer ``name`` (made on first use, kept until ``close``).

        Traversals keep their state here, so repeated calls bind the same handles and a backend
        that captures sequences replays them. A ``Graph`` runs one traversal at a time.
        """
        handle = self._scratch.get(name)
        if handle is None:
            size = max(nbytes, 4)
            handle = self.shared.get(f"graph.{name}", size) if self.shared is not None else self._res.alloc(size)
            self._scratch[name] = handle
        return handle

    def edge_sources(self) -> Any:
        """A resident u32 column of each edge's row (built on the device on first use, kept with the graph)."""
        if "sources" not in self._scratch:
            handle = self.scratch("sources", 4 * self.m)
            shift = lanes_shift(self.n)
            if self.m:
                self.backend.dispatch_sequence([(edge_sources_program(shift), [self.indptr_handle, handle],
                                                 _elements_config(self.n << shift))])
        return self._scratch["sources"]

    def connected_components(self, max_iterations: int | None = None, method: str = "afforest") -> Any:
        """Smallest vertex id of each vertex's component (edges taken as undirected), as u32 (numpy,
        or an array of the caller's kind for a graph given as device arrays).

        ``method="afforest"`` (the default): each vertex links its first ``SAMPLE_ROUNDS`` neighbours,
        the most frequent root of a fixed sample of vertices is taken as the giant component, and
        on an ``undirected`` graph only the vertices outside it link their other neighbours (a
        one-way graph unions every edge instead). ``method="sweep"``: a first link per vertex, then
        one union per edge and one compression. Either loops on the device (``dispatch_until``: a
        flag set by a union that gave up after its retries or a vertex too far from its root runs
        another iteration; one usually finishes); only the labels are read back. On ``cuda`` the
        call does not wait: the loop is enqueued (``compile_until``, replayed by later calls) and
        its flag checked without a wait, so a loop that did not converge raises from this or a
        later call. ``max_iterations`` caps the iterations (then the result may be partial).
        """
        if method not in CC_METHODS:
            raise InvalidProgram(f"connected_components method {method!r} is not one of {CC_METHODS}",
                                 "pass method='afforest' (the default) or method='sweep'.")
        n, be = self.n, self.backend
        if n == 0:
            return self.result(None, 0)
        every_vertex = _elements_config(n)
        ptr, idx = self.indptr_handle, self.indices_handle
        parent, flag = self.scratch("parent", 4 * n), self.scratch("flag", 4)
        limit = max_iterations if max_iterations is not None else n + 64
        # uncapped, a loop that ends with its flag set did not converge (checked with no wait)
        watch = _not_converged(limit) if max_iterations is None else None
        compiled = self._loops.get(("components", method, limit))
        if compiled is not None:  # the same components again: no steps to build or look up
            compiled.enqueue(after=self.caller_stream(), watch=watch)
            return self.result(parent, n)
        self.after_caller()
        first_links = (cc.cc_init_program(), [ptr, idx, parent], every_vertex)
        if self.m == 0 or max_iterations == 0:
            be.dispatch_sequence([first_links])
            return self.result(parent, n)
        if method == "sweep":
            start = [first_links]
            loop = [(cc.cc_hook_program(self.undirected), [self.edge_sources(), idx, parent, flag],
                     _elements_config(self.m)),
                    (jump_program(True), [parent, flag], every_vertex)]
        else:
            start, loop = self._afforest(parent, flag)
        raw = raw_backend(be)
        if hasattr(raw, "compile_until"):  # no host wait; kept for the next call
            compiled = self._loops[("components", method, limit)] = raw.compile_until(start, loop, flag, limit)
            compiled.enqueue(watch=watch)
            return self.result(parent, n)
        be.dispatch_sequence(start)
        iterations = be.dispatch_until(loop, flag, limit)
        if iterations == limit and max_iterations is None:  # the flag says whether the last one finished
            (word,) = be.dispatch_sequence([], reads=[(flag, 0, 4)])
            if _word(word):
                raise _not_converged(limit)(_word(word))
        return self.result(parent, n)

    def _afforest(self, parent: Any, flag: Any) -> tuple[list[tuple], list[tuple]]:
        """Afforest's steps (``graph_cc``): the sampling, run once, and the finish, looped."""
        n = self.n
        every_vertex = _elements_config(n)
        ptr, idx = self.indptr_handle, self.indices_handle
        table = self.scratch("cc_table", 4 * cc.TABLE_WORDS)
        start = [(cc.afforest_init_program(), [ptr, idx, parent, table], _elements_config(max(n, cc.TABLE_WORDS)))]
        for r in range(cc.SAMPLE_ROUNDS):
            start += [(cc.afforest_link_program(r), [ptr, idx, parent, table], every_vertex),
                      (cc.afforest_compress_program(False), [parent, flag], every_vertex)]
        if not self.undirected:  # a one-way edge's other end may be skipped: union every edge
            edges = self.edge_sources()
            return start, [(cc.cc_hook_program(False), [edges, idx, parent, flag], _elements_config(self.m)),
                           (cc.afforest_compress_program(False), [parent, flag], every_vertex)]
        start.append((cc.afforest_count_program(), [parent, table], _elements_config(cc.SAMPLES)))
        finish = [ptr, idx, parent, table, self.scratch("cc_big", 4 * n), flag]
        return start, [(cc.afforest_finish_program(), finish, every_vertex),
                       (cc.afforest_finish_big_program(self._lanes), finish, _elements_config(self._lanes)),
                       (cc.afforest_compress_program(True), [parent, flag, table], every_vertex)]

    def bfs(self, source: int, alpha: float = 14.0, beta: float = 24.0,
            trace: list[tuple[str, int, int, float]] | None = None) -> Any:
        """BFS levels from ``source`` (u32; ``0xFFFFFFFF`` = unreached) along the stored edges (numpy,
        or an array of the caller's kind for a graph given as device arrays).

        The level loop runs on the device (``dispatch_until``); only the levels are read back (the
        oracle, whose ``host_bfs`` is on by default, searches on the host instead: the same levels). On an
        undirected graph the direction follows Beamer's rule, decided on the device: bottom-up once
        the frontier's edges exceed 1/``alpha`` of the unvisited vertices' edges, top-down again once
        the frontier holds fewer than 1/``beta`` of the vertices (``alpha=0``: top-down only).
        ``trace``, when given, drives the same steps one level per host call instead and gets one
        ``(direction, frontier vertices, frontier edges, wall seconds)`` per level.
        """
        n, be = self.n, self.backend
        if isinstance(source, bool) or not isinstance(source, (int, np.integer)) or not 0 <= source < n:
            raise InvalidProgram(f"source {source!r} is not a vertex of this {n}-vertex graph",
                                 f"pass an int in [0, {n}).")
        decide_program = kernels.decide_program(self.undirected, float(alpha), float(beta))
        if trace is None and getattr(be, "host_bfs", False):  # the oracle: the same levels, searched on the host
            return be.bfs_levels(self.indptr_handle, self.indices_handle, n, self.m, int(source))
        levels, frontiers = self.scratch("levels", 4 * n), self.scratch("frontiers", 8 * n)
        next_stats, ctl = self.scratch("next_stats", 8), self.scratch("ctl", 4 * kernels.CTL_WORDS)
        flag, source_word = self.scratch("flag", 4), self.scratch("source", 4)
        source_words = [(source_word, np.array([source], dtype=np.uint32))]
        cap = n // LEVELS_PER_TEST + 2  # two levels an iteration (see below)
        search = self._loops.get(decide_program) if trace is None else None
        if search is not None:  # the same search again: no steps to build or look up
            search.enqueue(source_words, after=self.caller_stream())
            return self.result(levels, n)
        self.after_caller()
        step_handles = [self.indptr_handle, self.indices_handle, levels, frontiers, next_stats, ctl]
        decide = (decide_program, [levels, next_stats, ctl, flag], ONE_INVOCATION)
        lanes = _elements_config(self._lanes)
        level = [(kernels.level_program(self._lanes, self.undirected), step_handles, lanes), decide]
        start = [(kernels.init_program(), [self.indptr_handle, levels, frontiers, next_stats, ctl, source_word],
                  _elements_config(n)), decide]
        reads = [] if trace is None else [(ctl, 0, 4 * kernels.CTL_WORDS)]
        raw = raw_backend(be)
        if trace is None and hasattr(raw, "compile_until"):  # no host wait; kept for the next search from any source
            search = self._loops[decide_program] = raw.compile_until(start, level * LEVELS_PER_TEST, flag, cap)
            search.enqueue(source_words)
            return self.result(levels, n)
        enqueues = hasattr(raw, "enqueue_until")
        if enqueues:  # the source goes in with the start (a word only the host writes): no wait until the result
            words = be.enqueue_sequence(start, writes=source_words, reads=reads)
        else:
            be.upload_resident(source_word, source_words[0][1])
            words = be.dispatch_sequence(start, reads=reads)
        if trace is None:
            # two levels an iteration: one WHILE test for every two (a level after the last one finds
            # an empty frontier and does nothing); at most n levels, each ending with a frontier
            until = be.enqueue_until if enqueues else be.dispatch_until
            until(level * LEVELS_PER_TEST, flag, cap)
        else:
            (words,) = words
            while (words := np.asarray(words).view(np.uint32))[kernels.SIZE]:
                started = time.perf_counter()
                (after,) = be.dispatch_sequence(level, reads=[(ctl, 0, 4 * kernels.CTL_WORDS)])
                trace.append(("bottom-up" if words[kernels.MODE] == kernels.BOTTOM_UP else "top-down",
                              int(words[kernels.SIZE]), int(words[kernels.EDGES]), time.perf_counter() - started))
                words = after
        return self.result(levels, n)


def _not_converged(limit: int) -> Callable[[int], Exception]:
    """The error of components whose loop ended at ``limit`` iterations with its flag still set."""
    def fail(word: int) -> Exception:
        return InvalidProgram(f"connected_components did not converge in {limit} iterations",
                              "report this graph as a bug; it should never happen.")
    return fail


@cache
def _elements_config(elements: int) -> DispatchConfig:
    """One shared config per element count, so a backend that caches bound steps by config reuses them."""
    return DispatchConfig(elements=elements)


@contextmanager
def one_call(indptr: object, indices: object, backend: object | None, undirected: bool) -> Iterator[Graph]:
    """The ``Graph`` of a plain call. Given device arrays on a backend that binds them, its buffers
    are ``vyre.lib``'s scratch (the same handles for every call of the same size, the CSR arrays
    borrowed by role), held under the scratch's lock for the call: a loop of plain calls binds
    and captures once, as a ``Graph`` kept open does, and allocates nothing per call."""
    from vyre.lib.io import device_array_info

    be = backend_or_default(backend)
    shared = scratch_for(be) if any(device_array_info(a) is not None for a in (indptr, indices)) and binds(be) else None
    if shared is None:
        with Graph(indptr, indices, backend=be, undirected=undirected) as g:
            yield g
        return
    with shared.lock, Graph(indptr, indices, backend=be, undirected=undirected, shared=shared) as g:
        yield g


def connected_components(indptr: object, indices: object, *, backend: object | None = None,
                         undirected: bool = False, max_iterations: int | None = None,
                         method: str = "afforest") -> Any:
    """Label each vertex with the smallest vertex id of its (undirected) component, as u32.

    ``undirected=True`` says every edge is stored both ways, so each is looked at once. Device
    arrays are read in place and give a result of their kind (``Graph``).
    """
    with one_call(indptr, indices, backend, undirected) as g:
        return g.connected_components(max_iterations, method)


def bfs(indptr: object, indices: object, source: int, *, backend: object | None = None,
        undirected: bool = False, alpha: float = 14.0, beta: float = 24.0) -> Any:
    """BFS levels from ``source`` (u32; ``0xFFFFFFFF`` = unreached) over the CSR graph's edges.

    ``undirected=True`` says every edge is stored both ways, which allows direction-optimising
    bottom-up steps (``Graph.bfs`` explains ``alpha`` and ``beta``). To run many searches on one
    graph, build a ``Graph`` once and call its ``bfs``. Device arrays are read in place and give
    a result of their kind (``Graph``).
    """
    with one_call(indptr, indices, backend, undirected) as g:
        return g.bfs(source, alpha, beta)


@cache
def copy_program() -> Program:
    """``out[i] = values[i]`` for ``i < len(out)``."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("values", 0, U32), BufferDecl.read_write("out", 1, U32)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.buf_len("out")), [Node.store("out", i, Expr.load("values", i))])],
        name="copy_u32",
    )


@cache
def zero_program() -> Program:
    """``out[i] = 0`` for ``i < len(out)`` (clears a resident buffer on the device, no host zeros)."""
    i = Expr.invocation_id(0)
    return Program([BufferDecl.read_write("out", 0, U32)], (_WG, 1, 1),
                   [Node.if_(Expr.lt(i, Expr.buf_len("out")), [Node.store("out", i, Expr.u32(0))])], name="zero_u32")


@cache
def gather_program() -> Program:
    """``out[i] = values[order[i]]`` for ``i < len(order)``."""
    i = Expr.invocation_id(0)
    return Program(
        [BufferDecl.read("values", 0, U32), BufferDecl.read("order", 1, U32),
         BufferDecl.read_write("out", 2, U32), BufferDecl.read("count", 3, U32, 1)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.load("count", Expr.u32(0))),
                  [Node.store("out", i, Expr.load("values", Expr.load("order", i)))])],
        name="gather_u32",
    )


def from_edges(n: int, src: object, dst: object, *, backend: object | None = None) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(indptr, indices)`` of the directed edges ``src[i] -> dst[i]`` over ``n`` vertices.

    Built on the device: a stable radix argsort of ``src`` (so each row keeps the input order of its
    edges), a gather of ``dst``, a histogram of ``src`` and a scan of it.
    """
    from vyre import lib

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n <= MAX_IDS:
        raise InvalidProgram(f"n={n!r} is not a vertex count of at most 2**30 (1,073,741,824) vertices; the CSR "
                             "holds n + 1 offsets", "pass the number of vertices, an int in [0, 2**30] "
                             "(renumber sparse vertex ids to 0 .. n - 1 first).")
    s, d = u32_array("src", src, backend), u32_array("dst", dst, backend)
    if s.size != d.size:
        raise InvalidProgram(f"src has {s.size} edges and dst {d.size}", "pass two arrays of the same length.")
    if s.size and (int(s.max()) >= n or int(d.max()) >= n):
        raise InvalidProgram(f"an edge names a vertex >= n={n}", "pass vertex ids in [0, n) or a larger n.")
    m = s.size
    be = backend_or_default(backend)
    on_device = not isinstance(s, np.ndarray)
    if m == 0:
        empty = np.zeros(n + 1, dtype=np.uint32), np.zeros(0, dtype=np.uint32)
        return tuple(be.to_device(a, be.stream_for(None)) for a in empty) if on_device else empty
    with ResidentSet(be) as res:
        h_src, h_dst = res.upload(s), res.upload(d)
        src_ra = lib.ResidentArray(h_src, np.uint32, m)
        order = lib.argsort(src_ra, backend=be)
        res.adopt(order.handle)
        counts = lib.histogram(src_ra, n, backend=be)
        res.adopt(counts.handle)
        ends = lib.inclusive_scan(counts, backend=be)
        res.adopt(ends.handle)
        h_idx = res.alloc(4 * m)
        be.dispatch_sequence([(gather_program(), [h_dst, order.handle, h_idx, res.upload(np.array([m], np.uint32))],
                               DispatchConfig(elements=m))])
        if on_device:  # CuPy results, copied on the device out of the handles freed below
            from vyre.lib.sharded import owned_copy

            h_ptr = res.alloc(4 * (n + 1))
            be.upload_resident(h_ptr, np.zeros(1, np.uint32))
            if n:
                be.upload_resident(h_ptr, be.view(ends.handle, np.uint32)[:n], 4)
            return owned_copy(be, h_ptr, np.dtype(np.uint32)), owned_copy(be, h_idx, np.dtype(np.uint32))
        indptr = np.zeros(n + 1, dtype=np.uint32)
        indptr[1:] = read_u32(be, ends.handle, n)
        return indptr, read_u32(be, h_idx, m)


@cache
def degree_keys_program() -> Program:
    """``keys[e] = 0xFFFFFFFF - degree(indices[e])`` (an id ``>= n``: degree 0): ascending, the
    neighbours by degree, highest first."""
    e, u = Expr.invocation_id(0), V("u")
    degree = Expr.select(Expr.lt(u, Expr.buf_len("indptr") - 1), kernels.degree(V("at")), Expr.u32(0))
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32), BufferDecl.read_write("keys", 2, U32)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(e, Expr.buf_len("indices")), [
            Node.let("u", Expr.load("indices", e)),
            Node.let("at", Expr.min(u, Expr.buf_len("indptr") - 2)),
            Node.store("keys", e, Expr.sub(Expr.u32(UNREACHED), degree)),
        ])],
        name="degree_keys",
    )


def neighbours_by_degree(indptr: object, indices: object, *, backend: object | None = None) -> tuple[Any, Any]:
    """The same graph with each row's neighbours in order of their degree, highest first (ties keep
    their order; an id ``>= n`` counts as degree 0): ``(indptr, indices)`` of the input's kind, the
    same ``indptr`` and a new ``indices``.

    Every traversal gives the same result on it; a BFS gets faster on graphs with hubs (a top-down
    step's claims and a bottom-up step's scan reach the hubs first: ``docs/workloads.md``). Built
    on the device, once per graph: a key per edge (its neighbour's inverted degree) and the
    library's ``segmented_sort`` of the rows, the neighbour ids moving with their keys.
    """
    from vyre import lib

    ptr, idx = check_csr(indptr, indices, backend)
    be = backend_or_default(backend)
    n, m = ptr.size - 1, idx.size
    on_device = not isinstance(idx, np.ndarray)
    if m == 0:
        return indptr, idx.copy()
    with ResidentSet(be) as res:
        h_ptr, h_idx = (res.bind(ptr), res.bind(idx)) if on_device else (res.upload(ptr), res.upload(idx))
        keys = res.alloc(4 * m)
        be.dispatch_sequence([(degree_keys_program(), [h_ptr, h_idx, keys], _elements_config(m))])
        sorted_keys, ordered = lib.segmented_sort(lib.ResidentArray(keys, np.uint32, m),
                                                  lib.ResidentArray(h_ptr, np.uint32, n + 1),
                                                  lib.ResidentArray(h_idx, np.uint32, m), backend=be)
        res.adopt(sorted_keys.handle, ordered.handle)
        if not on_device:
            return indptr, read_u32(be, ordered.handle, m)
        from vyre.lib.sharded import owned_copy

        return indptr, owned_copy(be, ordered.handle, np.dtype(np.uint32), m)  # one copy, out of the sort's result


def reference_levels(indptr: Sequence[int], indices: Sequence[int], source: int) -> np.ndarray:
    """BFS levels computed on the host, for tests and benchmarks."""
    from collections import deque

    n = len(indptr) - 1
    levels = np.full(n, UNREACHED, dtype=np.uint32)
    levels[source] = 0
    queue = deque([source])
    while queue:
        v = queue.popleft()
        for u in indices[indptr[v]:indptr[v + 1]]:
            if u < n and levels[u] == UNREACHED:
                levels[u] = levels[v] + 1
                queue.append(int(u))
    return levels


def rmat_edges(scale: int, edge_factor: int = 16, seed: int = 0,
               probabilities: tuple[float, float, float] = (0.57, 0.19, 0.19)) -> tuple[np.ndarray, np.ndarray]:
    """A Graph500-style R-MAT edge list of ``2**scale`` vertices and ``edge_factor * 2**scale`` edges.

    Vertex ids are permuted so that hubs are spread out; self-loops and duplicates are kept, as in
    Graph500 generators.
    """
    rng = np.random.default_rng(seed)
    m = edge_factor << scale
    a, b, c = probabilities
    src = np.zeros(m, dtype=np.uint32)
    dst = np.zeros(m, dtype=np.uint32)
    for bit in range(scale):
        r = rng.random(m, dtype=np.float32)
        down = r >= a + b                       # quadrants c and d: the source bit is set
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)  # quadrants b and d: the target bit is set
        src |= down.astype(np.uint32) << np.uint32(bit)
        dst |= right.astype(np.uint32) << np.uint32(bit)
    perm = rng.permutation(1 << scale).astype(np.uint32)
    return perm[src], perm[dst]
