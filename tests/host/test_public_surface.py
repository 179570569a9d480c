"""vyre_cuda's public surface is the table in docs/architecture.md: every other module is ``_``-named.

Users (examples, docs, plugin packs) import only public names; the entry points name public modules.
"""

from __future__ import annotations

import importlib
import re

import pytest

import vyre_cuda
from tests.imports import ROOT

HEADING = "## Public surface"
TESTS_ONLY = {"vyre_cuda.testing"}  # public by name, for this project's tests: its docstring says so


def documented() -> dict[str, set[str]]:
    """Public module -> the names its row lists (first cell: the module, second: backticked names)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = text[text.index(HEADING):].split("\n\n")[2].splitlines()[2:]
    table = {}
    for row in rows:
        module, names = (cell.strip() for cell in row.strip("|").split("|"))
        table[module.strip("`")] = set(re.findall(r"`(\w+)`", names))
    return table


def top_level_names() -> set[str]:
    """``vyre_cuda`` and its modules and packages whose names do not start with ``_``."""
    package = ROOT / "vyre_cuda"
    found = {"vyre_cuda"}
    for path in package.iterdir():
        name = path.stem if path.suffix == ".py" else path.name if (path / "__init__.py").is_file() else None
        if name and not name.startswith("_"):
            found.add(f"vyre_cuda.{name}")
    return found


def test_every_module_not_named_internal_is_in_the_table() -> None:
    assert top_level_names() - TESTS_ONLY == set(documented())


def test_the_package_root_offers_every_name_its_row_lists() -> None:
    listed = documented()["vyre_cuda"]
    assert listed <= set(vyre_cuda.__all__)
    assert set(vyre_cuda.__all__) <= listed
    assert all(getattr(vyre_cuda, name) is not None for name in listed)


@pytest.mark.parametrize("module", sorted(set(documented()) - {"vyre_cuda"}))
def test_public_modules_import_and_offer_what_the_table_says(module: str) -> None:
    loaded = importlib.import_module(module)
    assert [name for name in documented()[module] if not hasattr(loaded, name)] == []


def test_entry_points_name_public_modules() -> None:
    """The ``vyre`` entry points of pyproject.toml that are ours name public modules, which import by name."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text[text.index("[project.entry-points.vyre]"):].split("\n\n")[0]
    cuda = re.findall(r'^\w+ = "(vyre_cuda[\w.]*)"$', section, re.MULTILINE)
    assert cuda and all(target in documented() for target in cuda)
    for target in cuda:
        importlib.import_module(target)


def test_users_never_import_internal_modules() -> None:
    """Examples, plugin packs, the README and docs/ (bar the architecture guide) use public names only."""
    sources = [*ROOT.joinpath("examples").rglob("*.py"), *ROOT.joinpath("plugins").rglob("*.py"),
               *ROOT.joinpath("plugins").rglob("*.md"), ROOT / "README.md",
               *(p for p in ROOT.joinpath("docs").rglob("*.md") if p.name != "architecture.md")]
    internal = re.compile(r"(from|import)\s+vyre_cuda\.(_\w+|testing)|vyre_cuda\.testing")
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sources for m in internal.finditer(p.read_text("utf-8"))]
    assert not bad, bad
