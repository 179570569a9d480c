"""The host half stays CUDA-free: no module of ``vyre`` imports CuPy, torch or ``vyre_cuda``,
at module level or inside a function (device work goes through the backend object)."""

from __future__ import annotations

from tests.imports import imports

FORBIDDEN = ("cupy", "cupy_backends", "torch", "vyre_cuda")


def test_no_module_of_vyre_imports_cuda_libraries():
    bad = [f"{i.where} imports {i.target}" for i in imports("vyre") if i.target.split(".")[0] in FORBIDDEN]
    assert not bad, "\n".join(bad)
