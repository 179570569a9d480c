"""The same resident-API misuse gives the same exception and message on ``cuda`` as on the oracle."""

from __future__ import annotations

import numpy as np
import pytest

from tests.misuse_cases import misuses, normalise
from vyre.reference.backend import ReferenceBackend

pytestmark = pytest.mark.gpu


def _outcome(call) -> tuple[type, str]:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the type and message are what is compared
        return type(exc), normalise(str(exc))
    raise AssertionError("the misuse was accepted")


def test_every_misuse_matches_the_oracle(backend) -> None:
    with ReferenceBackend() as oracle:
        want, _ = misuses(oracle)
        got, handles = misuses(backend)
        try:
            for (name, ref_call, kind), (_, cuda_call, _) in zip(want, got):
                expected, actual = _outcome(ref_call), _outcome(cuda_call)
                assert actual == expected, name
                assert expected[0] is kind, name
            assert backend.download_resident(handles[0]).view(np.uint32).tolist() == [0, 1, 2, 3]
        finally:
            for h in handles:
                backend.free_resident(h)
