"""``_runtime.driver``: the cold driver paths through ``cuda.bindings``, checked without a GPU.

The structs are ``cuda.h``'s own (cuda.bindings builds them without a driver), so these tests
check that vyre fills the right fields with the right enums; the GPU tests run the calls.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from vyre_cuda._runtime import driver

ROOT = Path(__file__).resolve().parents[2]


def bindings():
    return pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")


def test_a_while_node_is_a_conditional_node_of_one_while_body() -> None:
    d = bindings()
    params = driver.while_params(d, d.CUgraphConditionalHandle(0x1234), 0xABC0)
    assert params.type == d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    cond = params.conditional
    assert cond.type == d.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
    assert (int(cond.handle), int(cond.size), int(cond.ctx)) == (0x1234, 1, 0xABC0)


def test_a_programmatic_launch_sets_the_serialization_attribute_and_the_geometry() -> None:
    d = bindings()
    config = driver.programmatic_config(d, (70, 2, 1), (256, 1, 1), 512, 0x5000)
    assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (70, 2, 1)
    assert (config.blockDimX, config.blockDimY, config.blockDimZ, config.sharedMemBytes) == (256, 1, 1, 512)
    assert int(config.hStream) == 0x5000 and config.numAttrs == 1
    (attr,) = config.attrs
    assert attr.id == d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert attr.value.programmaticStreamSerializationAllowed == 1


def test_every_call_vyre_makes_exists_in_the_binding() -> None:
    """The names ``_runtime.driver`` passes to ``call`` and the driver functions it uses directly."""
    d = bindings()
    tree = ast.parse((ROOT / "vyre_cuda/_runtime/driver.py").read_text())
    names = {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "call"
             and n.args and isinstance(n.args[0], ast.Constant)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("cu")}
    names.discard("cuGraphAddNode_v2")  # CUDA 12's name of CUDA 13's cuGraphAddNode: either is there
    assert {"cuGraphConditionalHandleCreate", "cuLaunchKernelEx", "cuDevicePrimaryCtxReset"} <= names
    assert [n for n in sorted(names) if not hasattr(d, n)] == []
    assert hasattr(d, "cuGraphAddNode_v2") or "dependencyData" in d.cuGraphAddNode.__doc__.split("\n")[0]


def test_without_a_driver_every_path_says_why_or_falls_back() -> None:
    if driver.unavailable() is None:
        pytest.skip("a CUDA driver is reachable here")
    assert "cuda.bindings" in driver.unavailable()
    with pytest.raises(RuntimeError, match="cuda.bindings"):
        driver.call("cuCtxGetCurrent")
    assert driver.error_name(700) == "CUDA error 700" and driver.function_name(0x1000) is None


def test_a_failed_call_becomes_the_vyre_error_for_its_status(monkeypatch) -> None:
    from vyre.driver.errors import DeviceLost, DispatchFailed

    monkeypatch.setattr(driver, "error_name", lambda status: {700: "CUDA_ERROR_ILLEGAL_ADDRESS"}.get(status, "x"))
    with pytest.raises(DeviceLost, match="cuGraphLaunch returned CUDA_ERROR_ILLEGAL_ADDRESS"):
        with driver.errors("running a loop"):
            raise driver.DriverCallFailed("cuGraphLaunch", 700)
    with pytest.raises(DispatchFailed, match="running a loop: cuGraphCreate returned"):
        with driver.errors("running a loop"):
            raise driver.DriverCallFailed("cuGraphCreate", 1)


def test_no_ctypes_struct_layout_of_a_cuda_type_outside_vyre_doctor() -> None:
    """Driver structs come from cuda.bindings; only ``vyre doctor`` (vyre_cuda/cli.py) may use ctypes
    (it runs without CuPy), and it declares no struct either."""
    found = []
    for path in sorted((ROOT / "vyre_cuda").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any("Structure" in ast.unparse(b) or "Union" in ast.unparse(b)
                                                      for b in node.bases):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("ctypes.CDLL", "ctypes.PyDLL") \
                    and path.name not in ("cli.py", "launch.py"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} loads libcuda through ctypes")
    assert found == []


def test_doctor_names_what_is_lost_without_the_bindings(monkeypatch) -> None:
    """``vyre doctor`` reads the distributions' metadata only: it works with neither CuPy nor the bindings."""
    from vyre_cuda import cli

    monkeypatch.setattr(cli, "_version", lambda d: None if d == "cuda-bindings" else "0.2.17")
    check = cli.check_bindings()
    assert check.status == "WARN" and "cuda-bindings is not installed: fixed-point loops" in check.detail
    assert "nvtx" not in check.detail and "vyre-cuda[cuda12]" in check.fix
    monkeypatch.setattr(cli, "_version", lambda d: "13.5.0")
    assert cli.check_bindings() == cli.Check("bindings", "OK", "cuda-bindings 13.5.0, nvtx 13.5.0")
