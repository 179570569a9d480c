"""The program index: which cached cubin a program compiles to, so a warm start skips code generation.

The module cache (``_runtime.loader``) keys a cubin by its PTX text, so finding it means emitting the
PTX first. A warm process does not need to: ``index_key`` names a program by what its PTX depends
on - the program's fingerprint (BLAKE2b of its wire form), the workgroup size, the coarsening
factor, the device's compute capability and driver, the package version and ``source_identity()``
(size and modification time of every source file of the code generator and the IR) - and the disk
cache maps that name to the module key of the cubin an earlier process linked from it. So a
change to the emitter in a source checkout changes every index key, and an index entry can never
serve a cubin made by other code.

Programs that call registered ops (``Expr.call``) are never indexed: an op's definition or a
plugin's lowering lives outside the program, so the fingerprint does not cover it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from vyre.ir.op import Op
from vyre.ir.program import Program
from vyre.ir.walk import iter_all_exprs
from vyre_cuda._runtime.cache import cache_version
from vyre_cuda._runtime.device import DeviceInfo

INDEX_SUFFIX = ".idx"
_SCHEMA = "vyre-cuda-program-index/1"
_MODULE_KEY = re.compile(rb"[0-9a-f]{64}")


def _source_dirs() -> tuple[Path, ...]:
    import vyre.ir
    from vyre_cuda import _codegen as codegen

    return (Path(codegen.__file__).parent, Path(vyre.ir.__file__).parent)


@functools.cache
def source_identity() -> str:
    """SHA-256 (hex) over the name, size and mtime of each ``.py`` file of the code generator and the IR,
    taken once per process."""
    digest = hashlib.sha256()
    for directory in _source_dirs():
        try:
            entries = sorted((e.name, e.stat()) for e in os.scandir(directory) if e.name.endswith(".py"))
        except OSError:
            entries = []
        for name, st in entries:
            digest.update(f"{directory.name}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return digest.hexdigest()


def indexable(program: Program) -> bool:
    """True when the program's PTX depends on nothing but the program (no ``Expr.call``)."""
    return not any(e.op == Op.CALL for e in iter_all_exprs(program.body))


def index_key(program: Program, fingerprint: bytes, block: tuple[int, int, int], coarsen: int,
              device: DeviceInfo) -> str | None:
    """The index entry's key for ``program`` (whose ``fingerprint()`` is ``fingerprint``); None when
    it is not ``indexable``."""
    if not indexable(program):
        return None
    digest = hashlib.sha256()
    for part in (_SCHEMA, fingerprint.hex(), "x".join(map(str, block)), str(coarsen),
                 device.compute_capability, str(device.driver_version), cache_version(), source_identity()):
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def module_key_of(payload: bytes | None) -> str | None:
    """The module key an index entry holds, or None when it holds anything else."""
    if payload is None or not _MODULE_KEY.fullmatch(payload):
        return None
    return payload.decode()


__all__ = ["INDEX_SUFFIX", "index_key", "indexable", "module_key_of", "source_identity"]
