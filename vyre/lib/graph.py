"""Graph workloads on any backend: breadth-first search and connected components over CSR graphs.

Both run as IR programs on resident buffers, so the oracle checks them and ``cuda`` runs them as
kernels. A graph is CSR: ``indptr`` (n + 1 u32 offsets) and ``indices`` (u32 neighbour ids);
neighbour ids ``>= n`` are ignored.

- ``bfs``: level-synchronous, top-down over a compacted frontier (an atomic counter appends newly
  reached vertices), switching to bottom-up steps (every unreached vertex looks for a parent in the
  current level) while the frontier is large, when the graph is undirected. One tiny readback (the
  next frontier's size) per level.
- ``connected_components``: hooking and pointer jumping (Shiloach-Vishkin style, as in ECL-CC and
  Afforest): each iteration hooks the larger of two different roots of every edge under the
  smaller one (atomic min), then every vertex jumps to its root. Iterates on the device with
  ``dispatch_until`` until nothing changes; the labels are then each component's smallest vertex.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

U32 = DataType.U32
UNREACHED = 0xFFFFFFFF
_WG = 256
_JUMP_HOPS = 64


def backend_or_default(backend: object | None) -> object:
    if backend is not None:
        return backend
    import vyre

    return vyre.acquire(allow_reference=True)


def u32_array(name: str, values: object) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise InvalidProgram(f"{name} must be a 1-D integer array, got shape {array.shape} dtype {array.dtype}",
                             "pass a 1-D numpy array of vertex ids or offsets.")
    if array.size and (array.min() < 0 or array.max() > UNREACHED):
        raise InvalidProgram(f"{name} holds values outside u32", "pass ids and offsets in [0, 2**32).")
    return np.ascontiguousarray(array, dtype=np.uint32)


def check_csr(indptr: object, indices: object) -> tuple[np.ndarray, np.ndarray]:
    """``indptr`` and ``indices`` as u32 arrays, checked to be a CSR graph."""
    ptr, idx = u32_array("indptr", indptr), u32_array("indices", indices)
    if ptr.size == 0:
        raise InvalidProgram("indptr is empty", "pass n + 1 offsets (np.zeros(1) for a graph of no vertices).")
    if ptr[0] != 0 or np.any(ptr[1:] < ptr[:-1]) or ptr[-1] != idx.size:
        raise InvalidProgram("indptr is not a CSR offset array (starts at 0, never decreases, ends at len(indices))",
                             "build the graph with vyre.lib.graph.from_edges or scipy.sparse.csr_matrix(...).indptr.")
    return ptr, idx


class ResidentSet:
    """Resident buffers of one backend that are freed together (``close()`` or ``with``)."""

    def __init__(self, backend: object) -> None:
        self.backend = backend
        self.handles: list[object] = []

    def upload(self, array: np.ndarray) -> object:
        """A new handle holding ``array``'s bytes (at least 4 bytes, so empty arrays get a handle too)."""
        handle = self.alloc(max(array.nbytes, 4))
        if array.nbytes:
            self.backend.upload_resident(handle, array)
        return handle

    def alloc(self, nbytes: int) -> object:
        """A new handle of ``nbytes``."""
        handle = self.backend.allocate_resident(nbytes)
        self.handles.append(handle)
        return handle

    def adopt(self, *handles: object) -> None:
        """Free ``handles`` (made elsewhere, e.g. by a library call) with the rest."""
        self.handles.extend(handles)

    def close(self) -> None:
        handles, self.handles = self.handles, []
        for handle in handles:
            self.backend.free_resident(handle)

    def __enter__(self) -> ResidentSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DeviceArrays:
    """Host arrays uploaded to one backend, freed together (``close()`` or ``with``)."""

    def __init__(self, backend: object | None, arrays: Sequence[np.ndarray]) -> None:
        self.backend = backend_or_default(backend)
        self._res = ResidentSet(self.backend)
        try:
            self.handles = [self._res.upload(a) for a in arrays]
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Free the device buffers."""
        self._res.close()

    def __enter__(self) -> DeviceArrays:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_u32(backend: object, handle: object, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=np.uint32)
    return backend.download_resident(handle, 0, 4 * count).view(np.uint32).copy()


def _word(data: np.ndarray) -> int:
    return int(np.asarray(data).view(np.uint32)[0])


# ---- connected components ------------------------------------------------------------------------
def _neighbours(v: Expr, body: list[Node]) -> Node:
    """``for e in indptr[v] .. indptr[v+1]: u = indices[e]; if u < n: body``."""
    return Node.loop("e", Expr.load("indptr", v), Expr.load("indptr", Expr.add(v, Expr.u32(1))), [
        Node.let("u", Expr.load("indices", Expr.var("e"))),
        Node.if_(Expr.lt(Expr.var("u"), Expr.buf_len("parent")), body),
    ])


ONE_INVOCATION = DispatchConfig(grid=(1, 1, 1))


@cache
def clear_program() -> Program:
    """``flag[0] = 0``."""
    return Program([BufferDecl.read_write("flag", 0, U32, 1)], (1, 1, 1),
                   [Node.store("flag", Expr.u32(0), Expr.u32(0))], name="clear_flag")


@cache
def hook_program() -> Program:
    """Hook the larger root of every edge's two parents under the smaller one; flag any difference."""
    v = Expr.invocation_id(0)
    pv, pu = Expr.var("pv"), Expr.var("pu")
    return Program(
        [BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32),
         BufferDecl.read_write("parent", 2, U32), BufferDecl.read_write("flag", 3, U32, 1)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(v, Expr.buf_len("parent")), [
            _neighbours(v, [
                Node.let("pv", Expr.load("parent", v)),
                Node.let("pu", Expr.load("parent", Expr.var("u"))),
                Node.if_(Expr.ne(pv, pu), [
                    Node.let("hi", Expr.max(pv, pu)),
                    Node.let("old", Expr.atomic(AtomicOp.MIN, "parent", Expr.var("hi"), Expr.min(pv, pu))),
                    Node.store("flag", Expr.u32(0), Expr.u32(1)),
                ]),
            ]),
        ])],
        name="cc_hook",
    )


@cache
def jump_program() -> Program:
    """Every vertex follows parent pointers (up to a fixed number of hops) and stores what it reached."""
    v = Expr.invocation_id(0)
    p = Expr.var("p")
    return Program(
        [BufferDecl.read_write("parent", 0, U32), BufferDecl.read_write("flag", 1, U32, 1)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(v, Expr.buf_len("parent")), [
            Node.let("start", Expr.load("parent", v)),
            Node.let("p", Expr.var("start")),
            Node.let("done", Expr.bool(False)),
            Node.loop("hop", Expr.u32(0), Expr.u32(_JUMP_HOPS), [
                Node.if_(Expr.not_(Expr.var("done")), [
                    Node.let("pp", Expr.load("parent", p)),
                    Node.if_(Expr.eq(Expr.var("pp"), p), [Node.assign("done", Expr.bool(True))],
                             [Node.assign("p", Expr.var("pp"))]),
                ]),
            ]),
            Node.if_(Expr.ne(p, Expr.var("start")), [
                Node.store("parent", v, p),
                Node.store("flag", Expr.u32(0), Expr.u32(1)),
            ]),
        ])],
        name="cc_jump",
    )


# ---- breadth-first search ------------------------------------------------------------------------
def _append(vertex: Expr) -> list[Node]:
    """Append ``vertex`` to the next frontier through its atomic counter."""
    return [
        Node.let("slot", Expr.atomic(AtomicOp.ADD, "next_count", Expr.u32(0), Expr.u32(1))),
        Node.store("next", Expr.var("slot"), vertex),
    ]


_BFS_BUFFERS = (
    BufferDecl.read("indptr", 0, U32), BufferDecl.read("indices", 1, U32),
    BufferDecl.read_write("levels", 2, U32), BufferDecl.read("frontier", 3, U32),
    BufferDecl.read("count", 4, U32, 1), BufferDecl.read_write("next", 5, U32),
    BufferDecl.read_write("next_count", 6, U32, 1), BufferDecl.read("level", 7, U32, 1),
)


@cache
def top_down_program() -> Program:
    """Each frontier vertex claims its unreached neighbours (compare-exchange) and appends them."""
    i = Expr.invocation_id(0)
    v = Expr.var("v")
    nxt = Expr.add(Expr.load("level", Expr.u32(0)), Expr.u32(1))
    return Program(
        _BFS_BUFFERS, (_WG, 1, 1),
        [Node.if_(Expr.lt(i, Expr.load("count", Expr.u32(0))), [
            Node.let("v", Expr.load("frontier", i)),
            Node.loop("e", Expr.load("indptr", v), Expr.load("indptr", Expr.add(v, Expr.u32(1))), [
                Node.let("u", Expr.load("indices", Expr.var("e"))),
                Node.if_(Expr.and_(Expr.lt(Expr.var("u"), Expr.buf_len("levels")),
                                   Expr.eq(Expr.load("levels", Expr.var("u")), Expr.u32(UNREACHED))), [
                    Node.let("old", Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "levels", Expr.var("u"), nxt,
                                                expected=Expr.u32(UNREACHED))),
                    Node.if_(Expr.eq(Expr.var("old"), Expr.u32(UNREACHED)), _append(Expr.var("u"))),
                ]),
            ]),
        ])],
        name="bfs_top_down",
    )


@cache
def bottom_up_program() -> Program:
    """Each unreached vertex looks for a neighbour in the current level (undirected graphs only)."""
    v = Expr.invocation_id(0)
    level = Expr.load("level", Expr.u32(0))
    return Program(
        _BFS_BUFFERS, (_WG, 1, 1),
        [Node.if_(Expr.and_(Expr.lt(v, Expr.buf_len("levels")),
                            Expr.eq(Expr.load("levels", v), Expr.u32(UNREACHED))), [
            Node.let("found", Expr.bool(False)),
            Node.loop("e", Expr.load("indptr", v), Expr.load("indptr", Expr.add(v, Expr.u32(1))), [
                Node.if_(Expr.not_(Expr.var("found")), [
                    Node.let("u", Expr.load("indices", Expr.var("e"))),
                    Node.if_(Expr.and_(Expr.lt(Expr.var("u"), Expr.buf_len("levels")),
                                       Expr.eq(Expr.load("levels", Expr.var("u")), level)),
                             [Node.assign("found", Expr.bool(True))]),
                ]),
            ]),
            Node.if_(Expr.var("found"), [Node.store("levels", v, Expr.add(level, Expr.u32(1))), *_append(v)]),
        ])],
        name="bfs_bottom_up",
    )


@cache
def advance_program() -> Program:
    """After a level: clear the consumed frontier's counter and step the level word."""
    return Program(
        [BufferDecl.read_write("count", 0, U32, 1), BufferDecl.read_write("level", 1, U32, 1)],
        (1, 1, 1),
        [Node.store("count", Expr.u32(0), Expr.u32(0)),
         Node.store("level", Expr.u32(0), Expr.add(Expr.load("level", Expr.u32(0)), Expr.u32(1)))],
        name="bfs_advance",
    )


class Graph(DeviceArrays):
    """A CSR graph resident on one backend: upload once, run many traversals, ``close()`` when done."""

    def __init__(self, indptr: object, indices: object, *, backend: object | None = None,
                 undirected: bool = False) -> None:
        ptr, idx = check_csr(indptr, indices)
        self.n = ptr.size - 1
        self.undirected = undirected
        super().__init__(backend, [ptr, idx])
        self.indptr_handle, self.indices_handle = self.handles

    def connected_components(self, max_iterations: int | None = None) -> np.ndarray:
        """Smallest vertex id of each vertex's component (edges taken as undirected), as u32."""
        n, be = self.n, self.backend
        if n == 0:
            return np.zeros(0, dtype=np.uint32)
        config = DispatchConfig(elements=n)
        limit = max_iterations if max_iterations is not None else 2 * n + 64
        with ResidentSet(be) as res:
            h_parent = res.upload(np.arange(n, dtype=np.uint32))
            h_flag = res.alloc(4)
            # One synchronisation per iteration: an iteration touches every edge, so reading the flag
            # each time costs far less than the extra iterations a batched dispatch_until would run.
            steps = [(clear_program(), [h_flag], ONE_INVOCATION),
                     (hook_program(), [self.indptr_handle, self.indices_handle, h_parent, h_flag], config),
                     (jump_program(), [h_parent, h_flag], config)]
            for _ in range(limit):
                (flag,) = be.dispatch_sequence(steps, reads=[(h_flag, 0, 4)])
                if _word(flag) == 0:
                    return read_u32(be, h_parent, n)
            if max_iterations is None:
                raise InvalidProgram(f"connected_components did not converge in {limit} iterations",
                                     "report this graph as a bug; it should never happen.")
            return read_u32(be, h_parent, n)

    def bfs(self, source: int, bottom_up_fraction: float = 1 / 16) -> np.ndarray:
        """BFS levels from ``source`` (u32; ``0xFFFFFFFF`` = unreached) along the stored edges.

        On an undirected graph, bottom-up steps run while the frontier holds more than
        ``bottom_up_fraction`` of the vertices.
        """
        n, be = self.n, self.backend
        if isinstance(source, bool) or not isinstance(source, (int, np.integer)) or not 0 <= source < n:
            raise InvalidProgram(f"source {source!r} is not a vertex of this {n}-vertex graph",
                                 f"pass an int in [0, {n}).")
        levels = np.full(n, UNREACHED, dtype=np.uint32)
        levels[source] = 0
        with ResidentSet(be) as res:
            h_levels = res.upload(levels)
            frontiers = [res.alloc(4 * n), res.alloc(4 * n)]
            be.upload_resident(frontiers[0], np.array([source], dtype=np.uint32))
            counts = [res.upload(np.ones(1, dtype=np.uint32)), res.upload(np.zeros(1, dtype=np.uint32))]
            h_level = res.upload(np.zeros(1, dtype=np.uint32))
            size, cur = 1, 0
            every_vertex = DispatchConfig(elements=n)
            while size:
                nxt = 1 - cur
                handles = [self.indptr_handle, self.indices_handle, h_levels, frontiers[cur], counts[cur],
                           frontiers[nxt], counts[nxt], h_level]
                if self.undirected and size > n * bottom_up_fraction:
                    step = (bottom_up_program(), handles, every_vertex)
                else:  # a grid per capacity class (the kernel reads the exact count): bound steps are reused
                    step = (top_down_program(), handles, _elements_config(1 << (size - 1).bit_length()))
                (word,) = be.dispatch_sequence([step, (advance_program(), [counts[cur], h_level], ONE_INVOCATION)],
                                               reads=[(counts[nxt], 0, 4)])
                size, cur = _word(word), nxt
            return read_u32(be, h_levels, n)


@cache
def _elements_config(elements: int) -> DispatchConfig:
    """One shared config per element count, so a backend that caches bound steps by config reuses them."""
    return DispatchConfig(elements=elements)


def connected_components(indptr: object, indices: object, *, backend: object | None = None,
                         max_iterations: int | None = None) -> np.ndarray:
    """Label each vertex with the smallest vertex id of its (undirected) component, as u32."""
    with Graph(indptr, indices, backend=backend) as g:
        return g.connected_components(max_iterations)


def bfs(indptr: object, indices: object, source: int, *, backend: object | None = None,
        undirected: bool = False, bottom_up_fraction: float = 1 / 16) -> np.ndarray:
    """BFS levels from ``source`` (u32; ``0xFFFFFFFF`` = unreached) over the CSR graph's edges.

    ``undirected=True`` says every edge is stored both ways, which allows bottom-up steps while the
    frontier holds more than ``bottom_up_fraction`` of the vertices. To run many searches on one
    graph, build a ``Graph`` once and call its ``bfs``.
    """
    with Graph(indptr, indices, backend=backend, undirected=undirected) as g:
        return g.bfs(source, bottom_up_fraction)


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

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n < UNREACHED:
        raise InvalidProgram(f"n={n!r} is not a vertex count", "pass an int in [0, 2**32 - 1).")
    s, d = u32_array("src", src), u32_array("dst", dst)
    if s.size != d.size:
        raise InvalidProgram(f"src has {s.size} edges and dst {d.size}", "pass two arrays of the same length.")
    if s.size and (int(s.max()) >= n or int(d.max()) >= n):
        raise InvalidProgram(f"an edge names a vertex >= n={n}", "pass vertex ids in [0, n) or a larger n.")
    m = s.size
    if m == 0:
        return np.zeros(n + 1, dtype=np.uint32), np.zeros(0, dtype=np.uint32)
    be = backend_or_default(backend)
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
        indptr = np.zeros(n + 1, dtype=np.uint32)
        indptr[1:] = read_u32(be, ends.handle, n)
        return indptr, read_u32(be, h_idx, m)


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
