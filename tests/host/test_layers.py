"""Imports run down the floors of docs/architecture.md's table, never up, and close no circle between units.

Every import of ``vyre`` and ``vyre_cuda`` counts: at module level, inside functions and under
``TYPE_CHECKING``. The table in the docs is the one statement of the floors; this test reads it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import pytest

from tests.imports import ROOT, Import, imports, modules

PACKAGES = ("vyre", "vyre_cuda")
MARKER = "<!-- floors: read by tests/host/test_layers.py"
# (importer, target) pairs that still run up, each with the reason it is not fixed yet
KNOWN: dict[tuple[str, str], str] = {}  # imports allowed to run up a floor, with why (none left)


@dataclass(frozen=True)
class Unit:
    name: str
    floor: int
    prefixes: tuple[str, ...]


def floors() -> list[Unit]:
    """The rows of the floors table in docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text[text.index(MARKER):].split("\n\n")[0].splitlines()[3:]
    units = []
    for row in table:
        floor, name, prefixes, _ = (cell.strip() for cell in row.strip("|").split("|"))
        units.append(Unit(name, int(floor), tuple(re.findall(r"`([\w.]+)`", prefixes))))
    return units


UNITS = floors()
ALL = modules(*PACKAGES)


def unit_of(module: str) -> Unit | None:
    """The unit of the longest prefix that names ``module`` or a package above it."""
    best: tuple[int, Unit] | None = None
    for unit in UNITS:
        for prefix in unit.prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), unit)
    return best[1] if best else None


def _edges() -> list[tuple[Unit, Unit, Import]]:
    """Imports between two different units of the project (targets resolved to a known module)."""
    found = []
    for imp in imports(*PACKAGES):
        target = imp.target
        while target and target not in ALL:
            target = target.rpartition(".")[0]
        if not target:
            continue  # not ours (numpy, cupy, the standard library)
        a, b = unit_of(imp.importer), unit_of(target)
        if a is not None and b is not None and a != b and (imp.importer, target) not in KNOWN:
            found.append((a, b, imp))
    return found


def test_known_exceptions_still_exist():
    """An exception that was fixed leaves the list (so the list only shrinks)."""
    pairs = {(i.importer, i.target) for i in imports(*PACKAGES)}
    assert not [pair for pair in KNOWN if pair not in pairs]


def test_every_module_is_on_a_floor():
    assert not [m for m in ALL if unit_of(m) is None]


def test_no_import_runs_up_a_floor():
    bad = [f"{imp.where}: {a.name} (floor {a.floor}) imports {imp.target} of {b.name} (floor {b.floor})"
           for a, b, imp in _edges() if b.floor > a.floor]
    assert not bad, "\n".join(bad)


def test_no_circle_between_units():
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], str] = {}
    for a, b, imp in _edges():
        graph[a.name].add(b.name)
        where.setdefault((a.name, b.name), imp.where)
    circles = []
    for start in list(graph):
        stack = [(start, (start,))]
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" -> ".join(f"{x} ({where[(x, y)]})" for x, y in zip(path, path[1:] + (start,))))
                elif nxt not in path:
                    stack.append((nxt, path + (nxt,)))
    assert not circles, "\n".join(sorted(circles)[:10])


@pytest.mark.parametrize("source, target, runs_up", [
    ("vyre_cuda._codegen.lowerings", "vyre_cuda.plugin", True),
    ("vyre.reference.backend", "vyre", True),
    ("vyre.ir.generate", "vyre.driver.config", False),
    ("vyre_cuda._runtime.context", "vyre_cuda._codegen.versions", False),
])
def test_the_table_orders_known_pairs(source, target, runs_up):
    """The floors say what the docs say (the import that closed the codegen circle runs up)."""
    a, b = unit_of(source), unit_of(target)
    assert a is not None and b is not None
    assert (b.floor > a.floor) is runs_up
