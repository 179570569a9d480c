"""The vyre-ops-bits pack on ``cuda``: ``bits.bswap32`` lowered to ``prmt.b32`` through the lowering hook.

The pack is loaded from ``plugins/vyre-ops-bits`` and registered with the plugin manager as its
entry point would be; its lowering reaches the emitter through ``vyre_cuda_register_lowerings``.
Every result is compared with the oracle, which runs the pack's numpy definition.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import U32_EDGES, check, elementwise, random_array

from vyre.ir import BufferDecl, DataType, Expr

pytestmark = pytest.mark.gpu

U32 = DataType.U32
PACK = Path(__file__).resolve().parents[2] / "plugins" / "vyre-ops-bits"


@pytest.fixture(scope="module")
def ops_bits():
    """The pack's plugin module, registered as the ``ops_bits`` plugin with its ops and lowerings loaded."""
    from vyre.driver.registry import get_plugin_manager
    from vyre.ops import register_op
    from vyre_cuda.plugin import load_lowerings
    from vyre_cuda.testing import unregister_lowering

    sys.path.insert(0, str(PACK))
    import vyre_ops_bits.plugin as plugin

    pm = get_plugin_manager()
    registered_here = not pm.has_plugin("ops_bits")
    if registered_here:
        pm.register(plugin, name="ops_bits")
    for op in plugin.vyre_register_ops():
        register_op(op)
    assert "bits.bswap32" in load_lowerings(force=True)
    yield plugin
    if registered_here:
        pm.unregister(plugin)
        unregister_lowering("bits.bswap32")
    sys.path.remove(str(PACK))


@pytest.mark.parametrize("expr", ["bswap", "bswap_of_bswap", "bswap_xor_parity"])
def test_bswap32_on_cuda_equals_the_oracle_on_random_words_and_edges(backend, rng, ops_bits, expr):
    words = np.concatenate([U32_EDGES, np.array([0x01020304, 0xFF000000, 0x000000FF], np.uint32),
                            random_array(rng, U32, 4099)]).astype(np.uint32)
    x = Expr.load("a", Expr.var("i"))
    value = {
        "bswap": Expr.call("bits.bswap32", x),
        "bswap_of_bswap": Expr.call("bits.bswap32", Expr.call("bits.bswap32", x)),
        "bswap_xor_parity": Expr.bitxor(Expr.call("bits.bswap32", x), Expr.call("bits.parity", x)),
    }[expr]
    program = elementwise(f"ops_bits_{expr}", [BufferDecl.read("a", 0, U32)], value,
                          BufferDecl.output("o", 1, U32, words.size))
    (out,) = check(backend, program, [words])
    if expr == "bswap":
        assert np.array_equal(out, words.byteswap())  # the oracle and numpy agree too
    if expr == "bswap_of_bswap":
        assert np.array_equal(out, words)
