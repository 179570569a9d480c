"""The 64-bit keys-only single-pass sort at several tile widths (keys per invocation), on one GPU.

On a GPU machine: ``python3 benchmarks/sort_wide_items.py 16 20 24 [--log2n 27] [--reps 20]``.
For each items value (``vyre.lib._sort.onesweep.ONESWEEP_WIDE_ITEMS`` and
``ONESWEEP_WIDE_LARGE_ITEMS`` patched, a fresh backend so no plan of another width is reused),
``lib.sort`` of 2^log2n random u64 keys on a ``ResidentArray`` (results handed back with
``lib.recycle``) is first checked bit for bit against ``cupy.sort``, then timed next to
``cupy.sort`` of the same keys (median ms from the call to a device synchronisation, after two
warm-up calls; ``bench_lib.wall_ms``). Widths over 48 KiB of workgroup memory run on dynamic
shared memory. Prints one markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_lib import wall_ms  # noqa: E402

from vyre import lib  # noqa: E402
from vyre.ir import DataType  # noqa: E402
from vyre.ir.layout import workgroup_bytes  # noqa: E402
from vyre.lib._sort import onesweep  # noqa: E402
from vyre.lib.blocks import WG  # noqa: E402


def tile_bytes(items: int) -> int:
    """Workgroup memory of one keys-only 64-bit onesweep pass at ``items`` keys per invocation."""
    return workgroup_bytes(onesweep.radix_onesweep(8, None, None, "none", items, 0, 1, raw=DataType.U64))


def measure(items: int, keys: Any, reps: int) -> dict[str, float]:
    """Check then time ``lib.sort`` at ``items`` keys per invocation, and ``cupy.sort``."""
    import cupy

    from vyre.lib import ResidentArray
    from vyre_cuda.backend import CudaBackend

    onesweep.ONESWEEP_WIDE_ITEMS = onesweep.ONESWEEP_WIDE_LARGE_ITEMS = items
    backend = CudaBackend()
    try:
        handle = backend.allocate_resident(keys.nbytes)
        backend.upload_resident(handle, keys)
        resident = ResidentArray(handle, keys.dtype.str, keys.size)
        out = lib.sort(resident, backend=backend)
        got = cupy.asarray(backend.download_resident(out.handle, 0, keys.nbytes).view(cupy.uint64))
        if not bool(cupy.array_equal(got, cupy.sort(keys))):
            raise AssertionError(f"items {items}: lib.sort of {keys.size} u64 keys differs from cupy.sort")
        lib.recycle(out, backend=backend)

        def vyre_sort() -> None:
            lib.recycle(lib.sort(resident, backend=backend), backend=backend)

        vyre_ms = wall_ms(vyre_sort, reps)
        cupy_ms = wall_ms(lambda: cupy.sort(keys), reps)
        backend.free_resident(handle)
        return {"vyre": vyre_ms, "cupy": cupy_ms}
    finally:
        backend.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("items", type=int, nargs="+", help="keys per invocation of the keys-only tiles")
    parser.add_argument("--log2n", type=int, default=27)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    import cupy

    n = 1 << args.log2n
    keys = cupy.random.default_rng(2).integers(0, 2**62, n, dtype=cupy.int64).view(cupy.uint64)
    default = onesweep.ONESWEEP_WIDE_ITEMS, onesweep.ONESWEEP_WIDE_LARGE_ITEMS
    print(f"2^{args.log2n} u64 keys, {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"ONESWEEP_WIDE_ITEMS, ONESWEEP_WIDE_LARGE_ITEMS = {default} in this tree")
    print("| items | tile keys | workgroup bytes | vyre ms | cupy.sort ms | vyre / cupy |")
    print("|---|---|---|---|---|---|")
    for items in args.items:
        ms = measure(items, keys, args.reps)
        print(f"| {items} | {WG * items} | {tile_bytes(items)} | {ms['vyre']:.2f} | {ms['cupy']:.2f} | "
              f"{ms['vyre'] / ms['cupy']:.3f} |", flush=True)
    onesweep.ONESWEEP_WIDE_ITEMS, onesweep.ONESWEEP_WIDE_LARGE_ITEMS = default


if __name__ == "__main__":
    main()
