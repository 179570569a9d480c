"""A kernel's ``def`` is parsed from its own lines (not its whole file) when that cut is exact: the
syntax tree, line numbers and columns included, is the one the whole file's parse gives; a cut that
is not exact (a decorator or signature closed at the def's indentation) falls back to the file."""

from __future__ import annotations

import ast
import linecache
from pathlib import Path

import pytest

from vyre.frontend import source

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for d in ("vyre/lib", "vyre/frontend", "tests/frontend", "examples") for p in (ROOT / d).rglob("*.py"))


def _defs(lines: list[str]) -> dict[int, ast.FunctionDef]:
    defs: dict[int, ast.FunctionDef] = {}
    source._collect_defs(ast.parse("".join(lines)).body, defs)
    return defs


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_def_parsed_alone_is_the_whole_files_def(path: Path) -> None:
    lines = linecache.getlines(str(path))
    for first, whole in _defs(lines).items():
        alone = source._parse_block(str(path), lines, first)
        if alone is not None:
            assert ast.dump(alone, include_attributes=True) == ast.dump(whole, include_attributes=True)


def test_an_inexact_cut_falls_back_to_the_file(tmp_path: Path) -> None:
    text = ("def outer():\n"
            "    @decorate(\n"
            "        1,\n"
            "    )\n"
            "    def inner(\n"
            "        a,\n"
            "    ):\n"
            "        s = '''\n"
            "text at column zero\n"
            "'''\n"
            "        return a\n")
    path = tmp_path / "cut.py"
    path.write_text(text)
    lines = linecache.getlines(str(path))
    assert source._parse_block(str(path), lines, 2) is None
    found = source._find_def(str(path), lines, 2)
    assert found is not None and found.name == "inner" and found.lineno == 5
