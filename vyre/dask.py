"""``vyre.dask``: vyre programs over Dask arrays, one backend per worker process.

Needs the optional extra ``vyre-cuda[dask]`` (``dask[distributed]``); importing ``vyre`` does
not import Dask. Every block runs on the backend of the worker process that holds it, acquired
once per process (``vyre.acquire()``, which honours ``VYRE_BACKEND``; ``local_cluster`` gives each
worker process one GPU: ``dask_cuda.LocalCUDACluster`` when dask-cuda is installed, else a
``LocalCluster`` with ``CUDA_VISIBLE_DEVICES`` per worker, or the CPU oracle when there is no GPU).
Programs travel as their wire form (whose header carries its digest) in a ``BlockRun``, the one
callable of every block's task, and are decoded once per worker process (``decoded_programs``), so
a block costs two dictionary reads and a dispatch, not a decode or a compile.

- ``map_blocks(program, *arrays)``: one dispatch per block; the program sees the block's own
  indices and lengths, as a numpy function does under ``dask.array.map_blocks``. CuPy-backed
  dask arrays stay on the GPU: their blocks are dispatched in place and the result is a
  CuPy-backed dask array.
- ``persist(*arrays)``: persists 1-D dask arrays with block i of every one on the same worker, in
  equal shares, so ``map_blocks`` over them runs every block where its inputs are (one task per
  block, nothing moved between workers).
- ``reduce`` / ``histogram`` / ``inclusive_scan``: small per-block vyre programs combined with
  Dask's tree reductions (``reduce`` also combines partials with its kernel; ``histogram`` sums
  partial counts with ``dask.array.sum``; ``inclusive_scan`` carries each block's last value into
  the next with one numpy op). Element types U32 and I32; integers wrap as on the device.
  CuPy-backed blocks run the one-device ``vyre.lib`` call on the GPU and stay there.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

import numpy as np

from vyre.driver.config import DispatchConfig
from vyre.driver.errors import BackendUnavailable, InvalidProgram
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.program import Access
from vyre.ir.wire import HEADER_SIZE
from vyre.lib.multi import UFUNCS, as_program
from vyre.settings import BACKEND

FIX_INSTALL = "install the extra: pip install 'vyre-cuda[dask]'."
OPS = ("add", "min", "max", "or", "and", "xor")
_backends: dict[str, Any] = {}
_programs: dict[bytes, Program] = {}  # the wire header (its body's digest) -> the decoded program (per process)
_lock = threading.Lock()
_WG = 256
WORKER_THREADS = 2  # local_cluster's default threads per worker


def _dask_array() -> Any:
    try:
        import dask.array as da
    except ImportError as exc:
        raise InvalidProgram(f"vyre.dask needs Dask, which is not installed ({exc})", FIX_INSTALL) from exc
    return da


# ---- the worker side --------------------------------------------------------------------------------------
def worker_backend(backend: str | None = None) -> Any:
    """This process's backend for ``backend`` (an id, else ``VYRE_BACKEND``, else the best; oracle allowed).

    A block finds it with one dictionary read; the lock is taken only to start it."""
    key = backend or ""
    found = _backends.get(key)
    if found is not None:
        return found
    with _lock:
        found = _backends.get(key)
        if found is None:
            from vyre.driver.registry import default_backend as shared_backend

            found = _backends[key] = shared_backend(backend)
        return found


def program_of(wire: bytes) -> Program:
    """The decoded program of ``wire`` (programs travel as wire bytes: hashes of Python values differ
    between processes). Decoded once per process, then found by the wire's header, which carries
    the digest of its body: one dictionary read per block, however long the program."""
    key = wire[:HEADER_SIZE]
    program = _programs.get(key)
    if program is None:
        with _lock:
            program = _programs.get(key)
            if program is None:
                program = _programs[key] = Program.from_wire(wire)  # checks the body against the digest
    return program


def decoded_programs() -> int:
    """How many programs this process decoded (one per distinct program, however many blocks)."""
    return len(_programs)


def is_device_block(block: object) -> bool:
    return hasattr(block, "__cuda_array_interface__")


def _contiguous(block: Any) -> Any:
    """A C-contiguous block: device blocks stay on their device, host blocks are numpy."""
    if is_device_block(block):  # a CuPy block: its own methods keep it on its device
        return block if block.flags.c_contiguous else block.copy(order="C")
    return np.ascontiguousarray(block)


class BlockRun:
    """What one ``map_blocks`` call runs on each block; Dask's task for block i is ``BlockRun(...)(x_i, ...)``.

    It holds only what a worker needs to find its program: the program's wire form (pickled into
    each task as Dask pickles any small task argument; decoded once per worker process, after which
    a block finds the program by the wire's header), the output's index, the dispatch config and
    the backend id. A block then costs two dictionary reads, its inputs made contiguous (nothing
    copied that already is) and the dispatch; the backend's caches hold the compiled module."""

    __slots__ = ("backend", "config", "output_index", "wire")

    def __init__(self, wire: bytes, output_index: int, config: DispatchConfig | None, backend: str | None) -> None:
        self.wire, self.output_index, self.config, self.backend = wire, output_index, config, backend

    def __call__(self, *blocks: Any) -> Any:
        program = program_of(self.wire)
        inputs = [_block_input(b, decl) for b, decl in zip(blocks, program.inputs)]
        return worker_backend(self.backend).dispatch(program, inputs, self.config)[self.output_index]

    def __reduce__(self) -> tuple:
        return BlockRun, (self.wire, self.output_index, self.config, self.backend)

    def __dask_tokenize__(self) -> tuple:
        return "vyre.dask.BlockRun", self.wire[:HEADER_SIZE], self.output_index, self.config, self.backend

    def __repr__(self) -> str:
        digest = self.wire[HEADER_SIZE - 32:HEADER_SIZE]  # the header ends with the body's 32-byte digest
        return f"BlockRun({digest.hex()[:16]}, output_index={self.output_index})"


def _block_input(block: Any, decl: BufferDecl) -> Any:
    """A block as a dispatch input: bytes (a packed scalar) as they are, a device block that the
    kernel writes copied first (a dispatch on device arrays writes them in place, and dask blocks
    must stay as they were), anything else contiguous."""
    if isinstance(block, bytes):
        return block
    if is_device_block(block) and decl.access is Access.READ_WRITE:
        return block.copy(order="C")
    return _contiguous(block)


def _meta(arrays: list, dtype: np.dtype, shape: tuple[int, ...] = (0,)) -> Any:
    """An empty block of ``dtype`` of the first array's kind (CuPy-backed stays CuPy-backed)."""
    from dask.array.utils import meta_from_array

    if arrays and is_device_block(meta_from_array(arrays[0])):
        return meta_from_array(arrays[0], ndim=len(shape), dtype=dtype)  # CuPy-backed stays CuPy, no import
    return np.empty(shape, dtype)


# ---- map_blocks -----------------------------------------------------------------------------------------------
def map_blocks(kernel_or_program: object, *args: Any, output: str | None = None,
               config: DispatchConfig | None = None, backend: str | None = None) -> Any:
    """A dask array of ``output`` (default: the program's first output), one dispatch per block.

    ``args`` are the program's inputs in declaration order: 1-D dask arrays are split into
    blocks (all rechunked like the first), anything else (a numpy table, a uniform) goes whole to
    every block. A ``read_write`` output has its input's chunks; an ``output`` buffer its declared
    count per block. Block i runs where its inputs are: place them with ``persist(x, y, ...)`` so
    that no block first copies an input from another worker.
    """
    da = _dask_array()
    program = as_program(kernel_or_program)
    from vyre.ir.validate import validate

    validate(program)
    if len(args) != len(program.inputs):
        names = ", ".join(b.name for b in program.inputs)
        raise InvalidProgram(f"program {program.name or '<unnamed>'} takes {len(program.inputs)} inputs ({names}), "
                             f"got {len(args)}", "pass one argument per read/read_write/uniform buffer, in order.")
    args = _packed_scalars(kernel_or_program, args)
    arrays = [a for a in args if isinstance(a, da.Array)]
    if not arrays or any(a.ndim != 1 for a in arrays):
        raise InvalidProgram("map_blocks needs at least one dask array, and only 1-D ones",
                             "pass 1-D dask arrays (x.ravel()) for the buffers to split.")
    lengths = sorted({a.shape[0] for a in arrays})
    if len(lengths) > 1:
        raise InvalidProgram(f"map_blocks got dask arrays of different lengths ({', '.join(map(str, lengths))}); "
                             "their blocks would not line up",
                             "pass dask arrays of the same length (slice the longer ones, or pass a short table as "
                             "a numpy array, which goes whole to every block).")
    chunks = arrays[0].chunks
    args = tuple(a.rechunk(chunks) if isinstance(a, da.Array) else a for a in args)
    outputs = program.outputs
    names = [b.name for b in outputs]
    if not outputs or (output is not None and output not in names):
        raise InvalidProgram(f"program {program.name or '<unnamed>'} has no output {output!r} (outputs: {names})",
                             "pass output= one of the program's read_write/output buffers.")
    index = names.index(output) if output is not None else 0
    decl = outputs[index]
    if decl.access is Access.OUTPUT:
        if not decl.count:
            raise InvalidProgram(f"output buffer {decl.name!r} is sized at dispatch; map_blocks needs a declared count",
                                 f"declare a count for {decl.name!r}, or make it read_write.")
        out_chunks: tuple = ((decl.count,) * len(chunks[0]),)
    else:
        source = args[[b.name for b in program.inputs].index(decl.name)]
        if not isinstance(source, da.Array):
            raise InvalidProgram(f"read_write buffer {decl.name!r} must be a dask array to be split into blocks",
                                 f"pass {decl.name!r} as a dask array (dask.array.from_array(x)).")
        out_chunks = chunks
    return da.map_blocks(BlockRun(program.to_wire(), index, config, backend), *args, token="vyre_block",
                         dtype=decl.dtype.np_dtype, chunks=out_chunks, meta=_meta(arrays, decl.dtype.np_dtype))


def _packed_scalars(kernel_or_program: object, args: tuple) -> tuple:
    """A ``@vyre.kernel``'s scalar arguments as their 4-byte inputs (checked as a kernel call checks them)."""
    from vyre.frontend.kernel import Kernel

    return tuple(kernel_or_program.inputs(*args)) if isinstance(kernel_or_program, Kernel) else args


# ---- placing inputs ----------------------------------------------------------------------------------------------
def persist(*arrays: Any, client: Any = None) -> tuple:
    """``arrays`` persisted on the workers with block i of every array on one worker, each worker
    holding an equal share of the block indices (ceil(blocks / workers) at most).

    ``map_blocks`` runs block i where its inputs are; inputs persisted one by one land on workers
    independently, so most blocks would first copy an input from another worker. Blocks are computed
    where Dask puts them, then the ones on the wrong worker are copied once, here. Returns once every
    block is in place: new dask arrays over the placed blocks, one per argument, chunked like the first.
    """
    da = _dask_array()
    if not arrays or any(not isinstance(a, da.Array) or a.ndim != 1 for a in arrays):
        raise InvalidProgram("vyre.dask.persist takes 1-D dask arrays",
                             "pass the dask arrays map_blocks will split, e.g. persist(x, y).")
    lengths = sorted({a.shape[0] for a in arrays})
    if len(lengths) > 1:
        raise InvalidProgram(f"vyre.dask.persist got dask arrays of different lengths ({', '.join(map(str, lengths))})",
                             "pass dask arrays of one length: their blocks are placed by index.")
    from distributed import wait

    client = _client(client)
    workers = sorted(client.nthreads())
    if not workers:
        raise InvalidProgram("vyre.dask.persist found no worker to place blocks on",
                             "start the workers first and wait for them: client.wait_for_workers(n).")
    arrays = tuple(a.rechunk(arrays[0].chunks) for a in arrays)
    persisted = client.persist(list(arrays))
    wait(persisted)
    keys = [a.__dask_keys__() for a in persisted]
    held = [client.who_has(a) for a in persisted]
    owners = _owners([[set(h[k[i]]) for h, k in zip(held, keys)] for i in range(len(keys[0]))], workers)
    from dask.array.utils import meta_from_array
    from dask.base import tokenize

    placed = []
    for a, ks in zip(persisted, keys):
        name = f"placed-{tokenize(a.name, owners)}"
        futures = {}
        for worker in sorted(set(owners)):
            index = [i for i, w in enumerate(owners) if w == worker]
            moved = client.map(_same, [a.__dask_graph__()[ks[i]] for i in index], key=[(name, i) for i in index],
                               workers=[worker], allow_other_workers=False, pure=False)
            futures.update({(name, i): f for i, f in zip(index, moved)})
        placed.append(da.Array(futures, name, a.chunks, meta=meta_from_array(a)))
    wait(placed)
    return tuple(placed)


def _same(block: Any) -> Any:
    """A block as it is (run on the worker that must hold it: the block moves there, or stays)."""
    return block


def _owners(holders: list[list[set[str]]], workers: list[str]) -> list[str]:
    """The worker of each block index: the one already holding most of its arrays' blocks while it
    has room in its share, else the least loaded one (fewest blocks moved, every worker an equal share)."""
    share = -(-len(holders) // len(workers))
    load = dict.fromkeys(workers, 0)
    owners = []
    for sets in holders:
        room = [w for w in workers if load[w] < share]
        owner = max(room, key=lambda w: (sum(w in s for s in sets), -load[w]))
        load[owner] += 1
        owners.append(owner)
    return owners


def _client(client: Any) -> Any:
    """``client``, else the current ``distributed.Client``."""
    if client is not None:
        return client
    try:
        from distributed import get_client
    except ImportError as exc:
        raise InvalidProgram(f"vyre.dask.persist needs dask.distributed ({exc})", FIX_INSTALL) from exc
    try:
        return get_client()
    except ValueError as exc:
        raise InvalidProgram("vyre.dask.persist places blocks on the workers of a Dask cluster, and there is no client",
                             "connect first: client = distributed.Client(vyre.dask.local_cluster()), or pass "
                             "client=.") from exc


# ---- per-block programs -------------------------------------------------------------------------------------
def _dtype_of(x: Any, what: str) -> DataType:
    """The element type of the 1-D uint32/int32 dask array ``x``; anything else is refused."""
    if not isinstance(x, _dask_array().Array):
        raise InvalidProgram(f"{what} takes a dask array, got {type(x).__name__}",
                             "wrap the data with dask.array.from_array(np.asarray(x, np.uint32), chunks=...).")
    kinds = {np.dtype(np.uint32): DataType.U32, np.dtype(np.int32): DataType.I32}
    dtype = kinds.get(np.dtype(x.dtype))
    if dtype is None or getattr(x, "ndim", 1) != 1:
        raise InvalidProgram(f"{what} takes 1-D uint32 or int32 dask arrays, got {x.ndim}-D {x.dtype}",
                             "cast with x.astype('uint32') and flatten with x.ravel(); for floats use Dask's own "
                             "reductions.")
    return dtype


def _check_op(op: str) -> None:
    if op not in OPS:
        raise InvalidProgram(f"op {op!r} is not one of {', '.join(OPS)}", 'use op="add", "min", "max", ...')


def identity(op: str, dtype: DataType) -> int:
    """The start value of ``op`` over ``dtype`` (all ones for and, the extreme for min/max)."""
    info = np.iinfo(dtype.np_dtype)
    return {"add": 0, "or": 0, "xor": 0, "and": -1 if info.min else info.max,
            "min": info.max, "max": info.min}[op]


@functools.cache
def reduce_program(op: str, dtype: DataType) -> Program:
    """``acc[0] = acc[0] op x[0] op x[1] ...``: per workgroup in shared memory, then one global atomic."""
    atomic = AtomicOp[op.upper()]
    lid, gid = Expr.local_id(0), Expr.invocation_id(0)
    start = Expr.u32(identity(op, dtype)) if dtype is DataType.U32 else Expr.i32(identity(op, dtype))
    first = Expr.eq(lid, Expr.u32(0))
    return Program(
        [BufferDecl.read("x", 0, dtype), BufferDecl.read_write("acc", 1, dtype, 1),
         BufferDecl.workgroup("part", 1, dtype)],
        (_WG, 1, 1),
        [Node.if_(first, [Node.store("part", Expr.u32(0), start)]),
         Node.barrier(),
         Node.if_(Expr.lt(gid, Expr.buf_len("x")),
                  [Node.let("a", Expr.atomic(atomic, "part", Expr.u32(0), Expr.load("x", gid)))]),
         Node.barrier(),
         Node.if_(first, [Node.let("b", Expr.atomic(atomic, "acc", Expr.u32(0), Expr.load("part", Expr.u32(0))))])],
        name=f"dask_reduce_{op}_{dtype.name.lower()}")


@functools.cache
def histogram_program(bins: int) -> Program:
    """``counts[v] += 1`` for every value ``v < bins`` (others are ignored)."""
    gid, v = Expr.invocation_id(0), Expr.var("v")
    return Program(
        [BufferDecl.read("x", 0, DataType.U32), BufferDecl.output("counts", 1, DataType.U32, bins)],
        (_WG, 1, 1),
        [Node.if_(Expr.lt(gid, Expr.buf_len("x")), [
            Node.let("v", Expr.load("x", gid)),
            Node.if_(Expr.lt(v, Expr.u32(bins)),
                     [Node.let("old", Expr.atomic(AtomicOp.ADD, "counts", v, Expr.u32(1)))])])],
        name=f"dask_histogram_{bins}")


_SCAN_EXPR = {"add": Expr.add, "min": Expr.min, "max": Expr.max, "or": Expr.bitor, "and": Expr.bitand,
              "xor": Expr.bitxor}


@functools.cache
def scan_step_program(op: str, dtype: DataType) -> Program:
    """One Hillis-Steele step: ``dst[i] = src[i - d] op src[i]`` where ``i >= d``, else ``src[i]``."""
    i, d = Expr.var("i"), Expr.load("d", Expr.u32(0))
    v = Expr.var("v")
    return Program(
        [BufferDecl.read("src", 0, dtype), BufferDecl.read_write("dst", 1, dtype), BufferDecl.uniform("d", 2,
                                                                                                   DataType.U32, 1)],
        (_WG, 1, 1),
        [Node.let("i", Expr.invocation_id(0)),
         Node.if_(Expr.lt(i, Expr.buf_len("src")), [
             Node.let("v", Expr.load("src", i)),
             Node.let("w", _SCAN_EXPR[op](Expr.load("src", Expr.sub(i, d)), v)),
             Node.store("dst", i, Expr.select(Expr.ge(i, d), Expr.var("w"), v))])],
        name=f"dask_scan_{op}_{dtype.name.lower()}")


# ---- block functions (run on the workers) --------------------------------------------------------------------
def _reduce_block(block: np.ndarray, axis: Any = None, keepdims: bool = False, *, op: str,
                  backend: str | None) -> np.ndarray:
    if is_device_block(block):
        from vyre.lib import reduce as lib_reduce

        acc = lib_reduce(_contiguous(block).ravel(), op, backend=worker_backend(backend))
        return acc.reshape((1,) * block.ndim) if keepdims else acc.reshape(())
    dtype = DataType.U32 if block.dtype == np.uint32 else DataType.I32
    start = np.array([identity(op, dtype)], dtype.np_dtype)
    data = np.ascontiguousarray(block).ravel()
    (acc,) = worker_backend(backend).dispatch(reduce_program(op, dtype), [data, start],
                                              DispatchConfig(elements=data.size))
    return acc if keepdims else acc.reshape(())


def _histogram_block(block: np.ndarray, *, bins: int, backend: str | None) -> np.ndarray:
    if is_device_block(block):
        from vyre.lib import histogram as lib_histogram

        return lib_histogram(_contiguous(block).view(np.uint32), bins, backend=worker_backend(backend)).reshape(1, bins)
    data = np.ascontiguousarray(block).view(np.uint32)
    (counts,) = worker_backend(backend).dispatch(histogram_program(bins), [data], DispatchConfig(elements=data.size))
    return counts.reshape(1, bins)


def _scan_block(block: np.ndarray, axis: int = 0, *, op: str, backend: str | None) -> np.ndarray:
    """Inclusive scan of one block: log2(n) steps on resident buffers, one sequence, one read
    (a device block: ``vyre.lib.inclusive_scan`` on the GPU)."""
    if is_device_block(block):
        from vyre.lib import inclusive_scan as lib_scan

        return lib_scan(_contiguous(block), op, backend=worker_backend(backend))
    dtype = DataType.U32 if block.dtype == np.uint32 else DataType.I32
    data = np.ascontiguousarray(block)
    if data.size <= 1:
        return data.copy()
    be = worker_backend(backend)
    program = scan_step_program(op, dtype)
    handles = [be.allocate_resident(data.nbytes), be.allocate_resident(data.nbytes)]
    try:
        be.upload_resident(handles[0], data)
        steps, d = [], 1
        while d < data.size:
            handles.append(be.allocate_resident(4))
            be.upload_resident(handles[-1], np.array([d], np.uint32))
            src, dst = handles[len(steps) % 2], handles[(len(steps) + 1) % 2]
            steps.append((program, [src, dst, handles[-1]], DispatchConfig(elements=data.size)))
            d *= 2
        (out,) = be.dispatch_sequence(steps, reads=[(handles[len(steps) % 2], 0, data.nbytes)])
        return out.view(data.dtype)
    finally:
        for h in handles:
            be.free_resident(h)


# ---- public reductions ------------------------------------------------------------------------------------------
def reduce(x: Any, op: str = "add", *, split_every: int | None = None, backend: str | None = None) -> Any:
    """A 0-d dask array: ``op`` over every element of the 1-D uint32/int32 dask array ``x``.

    Blocks and the levels of Dask's tree both run the per-block kernel; an empty array gives the
    op's identity (0, or all ones for ``and``, the largest value for ``min``, the smallest for ``max``).
    """
    da = _dask_array()
    _check_op(op)
    _dtype_of(x, "vyre.dask.reduce")
    block = functools.partial(_reduce_block, op=op, backend=backend)
    meta = _meta([x], x.dtype, ())
    return da.reduction(x, chunk=block, aggregate=block, combine=block, dtype=x.dtype, split_every=split_every,
                        concatenate=True, meta=meta)


def histogram(x: Any, bins: int, *, split_every: int | None = None, backend: str | None = None) -> Any:
    """A dask array of ``bins`` uint32 counts of each value of ``x`` in ``[0, bins)`` (int32 read as uint32)."""
    da = _dask_array()
    _dtype_of(x, "vyre.dask.histogram")
    if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, (int, np.integer)) or not 1 <= bins <= 2**24:
        raise InvalidProgram(f"bins={bins!r} is not an int in 1..2**24", "pass the number of bins, e.g. bins=256.")
    bins = int(bins)
    partial_counts = da.map_blocks(functools.partial(_histogram_block, bins=bins, backend=backend), x, new_axis=1,
                                   chunks=((1,) * x.numblocks[0], (bins,)), dtype=np.uint32,
                                   meta=_meta([x], np.dtype(np.uint32), (0, 0)))
    return partial_counts.sum(axis=0, dtype=np.uint32, split_every=split_every)


def inclusive_scan(x: Any, op: str = "add", *, backend: str | None = None) -> Any:
    """A dask array like ``x``: element i is ``x[0] op ... op x[i]`` (per-block kernels, a carry between blocks)."""
    _dask_array()
    _check_op(op)
    dtype = _dtype_of(x, "vyre.dask.inclusive_scan")
    from dask.array.reductions import cumreduction

    block = functools.update_wrapper(functools.partial(_scan_block, op=op, backend=backend), _scan_block)
    return cumreduction(block, UFUNCS[op], identity(op, dtype), x, axis=0, dtype=x.dtype)


# ---- clusters --------------------------------------------------------------------------------------------------
def worker_environments(n_workers: int | None = None, backend: str | None = None) -> list[dict[str, str]]:
    """The environment of each worker: one visible GPU per worker when ``cuda`` lists devices, else the oracle."""
    from vyre.driver.devices import devices

    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, (int, np.integer))
                                  or n_workers < 1):
        raise InvalidProgram(f"n_workers={n_workers!r} is not a worker count (a cluster without workers never "
                             "runs a block)", "pass n_workers >= 1, or None for one per GPU (or a few oracle workers).")
    gpus = [d for d in devices() if d.backend == "cuda"] if backend in (None, "cuda") else []
    if gpus:
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        names = [visible[g.index] if g.index < len(visible) else str(g.index) for g in gpus]
        count = n_workers or len(names)
        return [{"CUDA_VISIBLE_DEVICES": names[k % len(names)], BACKEND: "cuda"} for k in range(count)]
    if backend == "cuda":
        raise BackendUnavailable("no CUDA device is listed (vyre.devices() has none)",
                                 "check nvidia-smi and CUDA_VISIBLE_DEVICES, or leave backend=None for oracle workers.")
    count = n_workers or max(1, min(4, os.cpu_count() or 1))
    return [{BACKEND: backend or "reference"} for _ in range(count)]


def local_cluster(n_workers: int | None = None, *, backend: str | None = None, threads_per_worker: int | None = None,
                  **cluster_options: Any) -> Any:
    """A local cluster of worker processes, one per visible GPU, each seeing only its GPU:
    ``dask_cuda.LocalCUDACluster`` when dask-cuda is installed (and at most one worker per GPU is
    asked for), else a ``distributed.LocalCluster`` with ``CUDA_VISIBLE_DEVICES`` set per worker;
    ``n_workers`` oracle workers when no GPU is listed (or ``backend="reference"``).

    ``threads_per_worker`` defaults to 2: one block dispatches while the worker hands the previous
    one back to Dask (the backend's lock keeps the dispatches one at a time).

    Returns once every worker is up. Connect with ``distributed.Client(cluster)``; close it with
    ``cluster.close()``.
    """
    try:
        from distributed import LocalCluster
    except ImportError as exc:
        raise InvalidProgram(f"vyre.dask.local_cluster needs dask.distributed ({exc})", FIX_INSTALL) from exc
    environments = worker_environments(n_workers, backend)
    options = {"host": "127.0.0.1", "dashboard_address": None, **cluster_options}
    gpus = sorted({env["CUDA_VISIBLE_DEVICES"] for env in environments if "CUDA_VISIBLE_DEVICES" in env})
    threads_per_worker = threads_per_worker or WORKER_THREADS
    if gpus and len(environments) <= len(gpus):
        cuda_cluster = _dask_cuda_cluster()
        if cuda_cluster is not None:
            return cuda_cluster(CUDA_VISIBLE_DEVICES=",".join(env["CUDA_VISIBLE_DEVICES"] for env in environments),
                                n_workers=len(environments), threads_per_worker=threads_per_worker, **options)

    class PerWorkerEnvironment(LocalCluster):
        """Worker k gets ``environments[k]`` (``scale`` asks ``new_worker_spec`` for each new worker)."""

        def new_worker_spec(self) -> dict:
            spec: dict[str, Any] = super().new_worker_spec()
            name, template = next(iter(spec.items()))
            options = dict(template["options"], env=environments[int(name) % len(environments)])
            return {name: dict(template, options=options)}

    cluster = PerWorkerEnvironment(n_workers=0, processes=True, threads_per_worker=threads_per_worker,
                                   name="vyre", **options)
    cluster.scale(len(environments))
    cluster.wait_for_workers(len(environments))
    return cluster


def _dask_cuda_cluster() -> Any:
    """``dask_cuda.LocalCUDACluster``, or None when dask-cuda is not installed."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        return None
    return LocalCUDACluster


__all__ = ["OPS", "WORKER_THREADS", "BlockRun", "decoded_programs", "histogram", "identity", "inclusive_scan",
           "local_cluster", "map_blocks", "persist", "program_of", "reduce", "worker_backend", "worker_environments"]
