"""``histogram``: how many elements equal each value in ``[0, bins)``. See docs/lib.md."""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.ir import DataType
from vyre.lib._histogram import topology as topo
from vyre.lib.io import Call, as_array, library_call
from vyre.lib.plan import capacity

INT_TYPES = (DataType.U8, DataType.I8, DataType.U16, DataType.I16, DataType.U32, DataType.I32, DataType.U64,
             DataType.I64)
COUNT_TYPES = {np.dtype(np.uint32): DataType.U32, np.dtype(np.uint64): DataType.U64}


@library_call
def histogram(x: object, bins: int, *, counts_dtype: object = np.uint32, stream: object = None,
              backend: Any = None, scratch: Any = None) -> Any:
    """``counts[v]`` = how many elements equal ``v``, for ``v`` in ``[0, bins)`` (``counts_dtype``:
    uint32, the default, or uint64).

    Values outside the range (negative ones included) are ignored.
    """
    a = as_array(x, "x", INT_TYPES)
    count_type = _count_type(counts_dtype)
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or not 0 <= int(bins) <= 2**31:
        raise InvalidProgram(f"bins={bins!r} is not a count in [0, 2**31]",
                             "pass a non-negative int bins of at most 2**31 (the counts buffer's capacity class "
                             "must fit u32 element counts).")
    bins = int(bins)
    limit = backend.max_buffer_bytes() if hasattr(backend, "max_buffer_bytes") else 2**31
    if capacity(bins) * count_type.size > limit:
        raise InvalidProgram(f"bins={bins} needs {capacity(bins) * count_type.size} bytes of counts, over the "
                             f"backend's {limit}-byte buffer limit", "use fewer bins, or bucket the values first.")
    call = Call(backend, scratch, a, stream=stream)
    counts_np = count_type.np_dtype
    if bins == 0:
        return call.empty(counts_np)

    def build() -> Any:
        plan = call.plan()
        src = call.upload(plan, "x", a)
        counts = call.result(plan, "hist.counts", bins, counts_np)
        topo.histogram(plan, a.dtype, src, counts, a.n, bins, count_type)
        call.run(plan)
        return call.output(counts, counts_np, bins)

    return call.fast(("histogram", bins, count_type), build, lambda outs: outs[0])


def _count_type(counts_dtype: object) -> DataType:
    """The counts' type of ``histogram``: U32 or U64, else ``InvalidProgram``."""
    try:
        np_dtype = np.dtype(counts_dtype)  # type: ignore[call-overload]
    except TypeError:
        np_dtype = None
    if np_dtype not in COUNT_TYPES:
        raise InvalidProgram(f"counts_dtype={counts_dtype!r} is not a histogram count type",
                             "pass counts_dtype=numpy.uint32 (the default) or numpy.uint64.")
    return COUNT_TYPES[np_dtype]
