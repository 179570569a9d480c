"""The front end's kernels on ``cuda``: every construct kernel against the oracle (bit for bit) and
numpy, scalars passed as Python numbers, the default backend and its cached pipeline, resident
handles and Out[T] sized at dispatch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))

from frontend_cases import CASES, N, by_name  # noqa: E402

from vyre.driver.config import DispatchConfig  # noqa: E402
from vyre.reference import run  # noqa: E402
from vyre.reference.ulp import assert_outputs_equal  # noqa: E402

pytestmark = pytest.mark.gpu

ORDER_DEPENDENT = {("histogram16", 1)}  # compare-exchange winner: any invocation may win


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kernel_on_cuda_matches_the_oracle_and_numpy(case, backend, rng):
    if case.name == "subgroups" and not backend.supports_subgroup_ops():
        pytest.skip("the device reports no subgroup support")
    inputs = case.inputs(rng)
    got = case.kernel(*inputs, backend=backend, **case.call)
    program = case.kernel.specialise(case.call.get("output_counts"), case.call.get("elements"))
    config = DispatchConfig(grid=case.call.get("grid"), elements=case.call.get("elements"))
    expected = run(program, case.kernel.inputs(*inputs), config)
    with np.errstate(all="ignore"):
        numpy_expected = case.expected(*inputs)
    for k, (g, e, n) in enumerate(zip(got, expected, numpy_expected)):
        if (case.name, k) in ORDER_DEPENDENT:
            assert 1 <= g[0] <= N
            continue
        assert_outputs_equal([e], [g], program)
        if n is not None:
            assert_outputs_equal([np.asarray(n, g.dtype)], [g], program)


def test_default_backend_is_cuda_and_the_pipeline_is_reused(rng):
    saxpy = by_name("saxpy").kernel
    x, y = rng.standard_normal(4096, dtype=np.float32), rng.standard_normal(4096, dtype=np.float32)
    (first,) = saxpy(1.5, x, y)
    pipeline = saxpy._pipeline
    (second,) = saxpy(1.5, x, y)
    from vyre.frontend.kernel import default_backend

    assert saxpy._pipeline is pipeline and default_backend().id.startswith("cuda")
    expected = run(saxpy.program, saxpy.inputs(1.5, x, y))[0]
    assert_outputs_equal([expected], [first], saxpy.program)
    assert_outputs_equal([expected], [second], saxpy.program)


def test_resident_dispatch_and_out_sized_at_dispatch(backend, rng):
    transpose = by_name("transpose2x").kernel
    x = rng.standard_normal(128, dtype=np.float32)
    handles = [backend.allocate_resident(x.nbytes), backend.allocate_resident(x.nbytes)]
    try:
        backend.upload_resident(handles[0], x)
        transpose.dispatch_resident(handles, backend=backend, config=DispatchConfig(grid=(2, 2, 1)),
                                    output_counts={"out": 128})
        out = backend.download_resident(handles[1]).view(np.float32)
    finally:
        for h in handles:
            backend.free_resident(h)
    np.testing.assert_array_equal(out, x.reshape(16, 8).T.reshape(-1) * np.float32(2))
