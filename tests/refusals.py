"""``refused``: the shared check that a call is refused with ``InvalidProgram`` and a ``Fix:`` line."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vyre.driver.errors import InvalidProgram


def refused(call: Callable[[], object], *needles: str) -> str:
    """``call()`` raises InvalidProgram whose text ends in a Fix and names every needle; the message."""
    with pytest.raises(InvalidProgram) as info:
        call()
    message = str(info.value)
    assert "Fix: " in message and message.rstrip().endswith("."), message
    for needle in needles:
        assert needle in message, message
    return message
