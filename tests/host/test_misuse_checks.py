"""Resident-API misuse is refused by ``vyre.driver.resident_args`` the same way on every backend.

Here on the oracle; tests/gpu/test_misuse_gpu.py runs the same cases on ``cuda`` and compares.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.misuse_cases import misuses
from vyre.reference.backend import ReferenceBackend

CASES = [name for name, _, _ in misuses(ReferenceBackend())[0]]


@pytest.mark.parametrize("name", CASES)
def test_misuse_raises_the_shared_error_and_changes_nothing(name):
    with ReferenceBackend() as backend:
        cases, (h, _) = misuses(backend)
        _, call, kind = next(c for c in cases if c[0] == name)
        with pytest.raises(kind) as err:
            call()
        assert type(err.value) is kind and "Fix:" in str(err.value)
        assert backend.download_resident(h).view(np.uint32).tolist() == [0, 1, 2, 3]  # no step ran
        assert backend.metrics()["reference_dispatches"] == 0


def test_the_messages_say_what_is_wrong():
    with ReferenceBackend() as backend:
        cases, (h, tiny) = misuses(backend)
        messages = {}
        for name, call, _ in cases:
            try:
                call()
            except Exception as exc:  # noqa: BLE001 - each case raises; the message is what is checked
                messages[name] = str(exc)
    assert messages["upload past the end"] == (f"byte range offset=12 nbytes=8 is outside {h!r}. "
                                                "Fix: keep offset + nbytes within the handle's 16 bytes.")
    assert messages["sequence read past the end"].startswith(f"read range offset=8 nbytes=16 is outside {h!r}")
    assert messages["repeated bool count"] == "repeat count True is not a non-negative int. Fix: pass count >= 0."
    assert messages["until bool max_iterations"].startswith("max_iterations False is not a non-negative int")
    assert messages["until a flag under 4 bytes"].startswith(f"the flag {tiny!r} of dispatch_until has fewer")
    assert messages["allocate a bool size"].startswith("cannot allocate True bytes")
    assert messages["download a freed handle"].endswith("was already freed. Fix: do not use a handle after "
                                                        "free_resident(); allocate a new one.")
    assert "(forged or copied)" in messages["upload to a forged handle"]
    assert messages["download a non-handle"].startswith("'handle' is not a Resident handle")
