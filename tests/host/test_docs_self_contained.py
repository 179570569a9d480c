"""The README and docs/ stand on their own: no pointers to documents users do not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "plugins").glob("*/README.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_cite_no_spec_and_no_shared_folder(doc: Path):
    text = doc.read_text(encoding="utf-8")
    assert not re.search(r"\bSPEC\b", text), f"{doc.name} cites a SPEC: state the rule in the docs instead"
    assert "../shared" not in text and "/work/shared" not in text


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_picture_a_doc_shows_exists(doc: Path):
    for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
        assert (doc.parent / target).is_file(), f"{doc.name} shows {target}, which is missing"
