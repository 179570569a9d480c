"""Scratch buffers belong to the backend: no public ``vyre.lib`` call takes or shows ``scratch=``."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from vyre import lib
from vyre.lib import graph, text

CALLS = [getattr(lib, name) for name in lib.__all__ if callable(getattr(lib, name))]
CALLS += [graph.bfs, graph.connected_components, text.find_all, text.find_all_many]


@pytest.mark.parametrize("fn", CALLS, ids=lambda f: f.__name__)
def test_no_scratch_in_the_public_signature(fn) -> None:
    assert "scratch" not in inspect.signature(fn).parameters


def test_passing_scratch_is_refused_like_any_unknown_keyword() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'scratch'"):
        lib.reduce(np.arange(4, dtype=np.uint32), scratch=object())
