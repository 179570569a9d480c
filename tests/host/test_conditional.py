"""The pure parts of conditional-node fixed-point loops (no GPU): the setting, the fallback
decision, the condition kernel's PTX (assembled by ptxas when it is installed) and the graph cache
freeing the graphs it owns. The driver calls themselves are in ``test_driver.py``."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from vyre_cuda import ptx_version_for_driver
from vyre_cuda._runtime import conditional, settings
from vyre_cuda.testing import CONDITION_ENTRY, DeviceBuffer, GraphCache, condition_ptx


@pytest.mark.parametrize(("value", "on"), [(None, True), ("1", True), (" on ", True), ("TRUE", True), ("", True),
                                           ("0", False), ("false", False), ("OFF", False), (" no ", False)])
def test_the_setting_is_an_off_switch(monkeypatch, value, on) -> None:
    if value is None:
        monkeypatch.delenv(settings.CONDITIONAL, raising=False)
    else:
        monkeypatch.setenv(settings.CONDITIONAL, value)
    assert settings.conditional() is on


def test_the_setting_is_in_the_table_of_variables() -> None:
    assert "``VYRE_CUDA_CONDITIONAL=0``" in settings.__doc__


def test_loops_go_on_the_device_only_when_everything_allows_it() -> None:
    reason = conditional.unavailable_reason
    assert reason(True, True, 13000, ()) is None
    assert reason(True, True, 12040, ()) is None
    assert "VYRE_CUDA_CONDITIONAL" in reason(False, True, 13000, ())
    assert "VYRE_CUDA_GRAPHS=0" in reason(True, False, 13000, ())
    assert "12.3" in reason(True, True, 12030, ()) and "12.4+" in reason(True, True, 12030, ())
    assert "cuda.bindings is not installed" in reason(True, True, 13000, ("cuda.bindings is not installed",))
    assert "libcuda.so.1" in reason(True, True, 13000, ("libcuda.so.1",))
    assert reason(False, False, 11080, ("x",)).startswith("VYRE_CUDA_CONDITIONAL")  # the switch is named first


def test_without_a_driver_the_reason_says_why() -> None:
    """This host has no libcuda (or no cuda.bindings): loops would take the batched path, saying why."""
    from vyre_cuda.testing import driver

    if driver.unavailable() is None:
        pytest.skip("a CUDA driver is reachable here")
    (missing,) = conditional.missing_entry_points()
    assert "cuda.bindings" in missing
    assert missing in conditional.unavailable_reason(True, True, 13000, (missing,))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
@pytest.mark.parametrize(("sm", "driver"), [("90", 13000), ("80", 12040), ("75", 12080), ("100", 13000)])
def test_condition_kernel_assembles_without_the_device_runtime(tmp_path, sm, driver) -> None:
    """ptxas resolves ``cudaGraphSetConditional`` itself: a whole (non-relocatable) program."""
    ptx = condition_ptx(sm, ptx_version_for_driver(driver, sm))
    assert f".visible .entry {CONDITION_ENTRY}(" in ptx
    assert ("griddepcontrol.wait" in ptx) == (int(sm) >= 90)  # may start early only where it can wait
    path = tmp_path / "condition.ptx"
    path.write_text(ptx)
    done = subprocess.run(["ptxas", "--gpu-name", f"sm_{sm}", "-o", str(tmp_path / "c.cubin"), str(path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


class OwnedGraph:
    """A graph made outside the cache (like ``WhileGraph``): records its launches and frees."""

    def __init__(self) -> None:
        self.launches, self.frees = 0, 0

    def launch(self, stream: object) -> None:
        self.launches += 1

    def close(self) -> None:
        self.frees += 1


def test_graph_cache_frees_owned_graphs_once_and_unpins() -> None:
    counts: dict[str, int] = {}
    cache = GraphCache(lambda name, n: counts.__setitem__(name, counts.get(name, 0) + n), capacity=2)
    graphs = [OwnedGraph() for _ in range(4)]
    buf = DeviceBuffer(0x1000, 4, 256)
    entries = [cache.insert(("k", i), g, lambda ptr: None, (buf,), (), g.close) for i, g in enumerate(graphs)]
    assert counts["cuda_graph_captures"] == 4 and counts["cuda_graphs_live"] == 2
    assert [g.frees for g in graphs] == [1, 1, 0, 0] and buf.pins == 2  # the first two were evicted
    cache.replay(entries[3], None)
    assert graphs[3].launches == 1 and entries[3].replays == 1
    again = OwnedGraph()
    cache.insert(("k", 3), again, lambda ptr: None, (buf,), (), again.close)  # same key: the old one goes
    assert graphs[3].frees == 1 and not entries[3].alive
    cache.clear()
    assert [g.frees for g in graphs] == [1, 1, 1, 1] and again.frees == 1
    assert counts["cuda_graphs_live"] == 0 and buf.pins == 0 and len(cache) == 0


# SHA-256 of the snippets as the runtime wrote them before they moved to ``_codegen.snippets``.
_CONDITION_SHA = {
    ("80", "7.0"): "9bada2a4799e50e8da395a146f49acafa2690d319ecd10fb8f454d578c877575",
    ("90", "8.0"): "671a6e756fad36bc18afaba5b5d15dfd677db99907dbe45080eb55be01c34cd7",
    ("90a", "8.5"): "c71f7a64dd6364a4171e91ec4919a9e0a8f8392aea8702ca239bf00ba6b9bfca",
    ("100", "8.7"): "42c4a852a5b3083d2f911c2701bba67608a635260ce6df2eda6d99671576e9c8",
}
_FAULT_SHA = {
    "illegal_address": "a343d51abd9891f6deb12ea6c78270f4e45ac5e8d157d3d76e1491a48dd14f13",
    "trap": "517daffa27b8a1929e1d6e82cef17d566ca8c20dd7ef5bd842fb1752932373b5",
}


@pytest.mark.parametrize(("sm", "version"), sorted(_CONDITION_SHA))
def test_condition_kernel_text_is_unchanged_by_its_move(sm: str, version: str) -> None:
    """The hand-written condition kernel is byte for byte what the runtime loaded before (no new cubin key)."""
    assert hashlib.sha256(condition_ptx(sm, version).encode()).hexdigest() == _CONDITION_SHA[(sm, version)]


@pytest.mark.parametrize("kind", sorted(_FAULT_SHA))
def test_fault_kernel_text_is_unchanged_by_its_move(kind: str) -> None:
    """The fault-injection kernel is byte for byte what the runtime loaded before."""
    from vyre_cuda.testing import fault_ptx

    assert hashlib.sha256(fault_ptx(kind, "90", "8.0").encode()).hexdigest() == _FAULT_SHA[kind]
