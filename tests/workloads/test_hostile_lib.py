"""Hostile input to ``vyre.lib`` and its workloads (issue 30): a clean error with a Fix, never a wrong result,
a raw exception or a blow-up.

Cases that used to allocate gigabytes before checking run in a child interpreter under an
address-space rlimit and a timeout.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import vyre
from tests.refusals import refused
from vyre.lib import egraph, graph, multi, text

ROOT = Path(__file__).resolve().parents[2]
MEMORY = 1 << 30  # bytes of address space a child may use


def run_child(code: str, seconds: float = 10, memory: int = MEMORY) -> dict:
    """Run ``code`` (which sets ``out``) in a child under ``memory`` bytes and ``seconds``; its ``out`` or error."""
    wrapper = "import json\ntry:\n" + textwrap.indent(textwrap.dedent(code), "    ") + (
        "\nexcept BaseException as exc:\n    out = {'error': type(exc).__name__, 'message': str(exc)[:2000]}\n"
        "print(json.dumps(out))\n")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=seconds,
                              preexec_fn=limit, env=env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child did not finish within {seconds} s")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])



# ---- 1. vyre.lib and its workloads as attributes ----------------------------------------------------------------
def test_lib_and_workloads_are_attributes_after_import_vyre() -> None:
    out = run_child("""
        import sys
        import numpy as np
        import vyre
        eager = sorted(m for m in sys.modules if m.startswith("vyre.lib") or m == "vyre.dask")
        total = int(vyre.lib.reduce(np.arange(10, dtype=np.uint32)))
        found = [hasattr(getattr(vyre.lib, m), "__name__") for m in ("graph", "datalog", "egraph", "text", "multi")]
        import vyre.lib as lib
        out = {"eager": eager, "total": total, "found": found, "graph": lib.graph.bfs.__name__,
               "dask": vyre.dask.reduce.__name__, "dir": "lib" in dir(vyre) and "graph" in dir(lib)}
    """)
    assert out == {"eager": [], "total": 45, "found": [True] * 5, "graph": "bfs", "dask": "reduce", "dir": True}, out


def test_import_vyre_lib_does_not_import_workloads() -> None:
    out = run_child("""
        import sys
        import vyre.lib
        out = {"eager": sorted(m for m in ("graph", "datalog", "egraph", "text", "multi")
                               if "vyre.lib." + m in sys.modules)}
    """)
    assert out == {"eager": []}, out


def test_unknown_attribute_is_still_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        vyre.lib.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError, match="no_such_thing"):
        vyre.no_such_thing  # noqa: B018


# ---- 3. text needles, undirected graphs -------------------------------------------------------------------------
@pytest.mark.parametrize("needle", [np.array([0x161]), np.array([97.9]), np.array([-159]), [97.0], np.array([True])],
                         ids=["0x161", "97.9", "negative", "float-list", "bool"])
def test_find_all_refuses_needles_that_are_not_bytes(needle) -> None:
    refused(lambda: text.find_all(b"banana", needle), "needle", "0..255")


def test_find_all_takes_integer_needles_in_byte_range() -> None:
    assert text.find_all(b"banana", np.array([97, 110], np.int64)).tolist() == [1, 3]
    assert text.find_all(b"banana", [110, 97]).tolist() == [2, 4]


ONE_WAY = (np.array([0, 1, 1, 1], np.uint32), np.array([1], np.uint32))  # 0 -> 1 only, 3 vertices


def test_undirected_bfs_refuses_one_way_edges() -> None:
    refused(lambda: graph.bfs(*ONE_WAY, 1, undirected=True), "undirected", "both ways")
    refused(lambda: graph.Graph(*ONE_WAY, undirected=True), "undirected")
    refused(lambda: graph.connected_components(*ONE_WAY, undirected=True), "undirected")


def test_undirected_bfs_on_symmetric_edges_still_works() -> None:
    indptr, indices = graph.from_edges(3, np.array([0, 1, 1, 2]), np.array([1, 0, 2, 1]))
    assert graph.bfs(indptr, indices, 2, undirected=True).tolist() == [2, 1, 0]
    assert graph.bfs(*ONE_WAY, 1).tolist() == [graph.UNREACHED, 0, graph.UNREACHED]


# ---- 4. sizes checked before allocating ------------------------------------------------------------------------
def test_from_edges_with_a_huge_vertex_count_is_refused_before_allocating() -> None:
    out = run_child("""
        from vyre.lib import graph
        graph.from_edges(2**32 - 2, [], [])
        out = {"error": None}
    """)
    assert out["error"] == "InvalidProgram" and "Fix: " in out["message"] and "bins" not in out["message"], out
    assert "vertices" in out["message"], out


def test_congruence_closure_with_a_huge_id_is_refused_before_allocating() -> None:
    out = run_child("""
        import numpy as np
        from vyre.lib import egraph
        one = np.array([0], np.uint32)
        egraph.congruence_closure(np.array([2**32 - 2], np.uint32), one, one, one, np.zeros(0, np.uint32))
        out = {"error": None}
    """)
    assert out["error"] == "InvalidProgram" and "Fix: " in out["message"] and "e-class id" in out["message"], out


def test_limits_are_the_documented_ones() -> None:
    doc = (ROOT / "docs" / "workloads.md").read_text(encoding="utf-8")
    assert f"{graph.MAX_IDS:,}" in doc or "2**30" in doc
    refused(lambda: graph.from_edges(graph.MAX_IDS + 1, [], []), "vertices")
    empty = np.zeros(0, np.uint32)
    assert egraph.congruence_closure(empty, empty, empty, empty, empty).size == 0


# ---- 5. raw exceptions -------------------------------------------------------------------------------------------
X = np.arange(10, dtype=np.uint32)


def test_backend_id_strings_are_resolved() -> None:
    assert int(vyre.lib.reduce(X, backend="reference")) == 45
    assert graph.bfs(*ONE_WAY, 0, backend="reference").tolist() == [0, 1, graph.UNREACHED]
    assert text.find_all(b"aa", b"a", backend="reference").tolist() == [0, 1]


@pytest.mark.parametrize("backend", [42, object()], ids=["int", "object"])
def test_backend_that_is_not_one_is_refused(backend) -> None:
    refused(lambda: vyre.lib.reduce(X, backend=backend), "backend")
    refused(lambda: graph.bfs(*ONE_WAY, 0, backend=backend), "backend")


@vyre.kernel(workgroup_size=64)
def hist(x: vyre.In[vyre.u32], bins: vyre.Out[vyre.u32, 16]):
    i = vyre.gid()
    if i < len(x):
        vyre.atomic_add(bins, x[i] % 16, 1)


def test_multi_map_refuses_a_reduce_that_is_not_a_dict() -> None:
    refused(lambda: multi.map(hist, [X], reduce="add"), "reduce")


def test_multi_map_refuses_devices_that_are_not_devices() -> None:
    refused(lambda: multi.map(hist, [X], devices=[42], reduce={"bins": "add"}), "42")
