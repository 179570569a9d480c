"""Resident-API misuse that every backend must refuse with the same exception and message.

``misuses(backend)`` gives each case as ``(name, call, exception type)``; the host tests run them
on the oracle, the GPU tests on ``cuda`` and compare the messages with the oracle's.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from vyre.driver.backend import Resident
from vyre.driver.errors import InvalidHandle, InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

GID = Expr.invocation_id(0)
BUMP = Program([BufferDecl.read_write("a", 0, DataType.U32)], (64, 1, 1),
               [Node.store("a", GID, Expr.add(Expr.load("a", GID), Expr.u32(1)))], name="bump")


def normalise(message: str) -> str:
    """A message with handle ids blanked (each backend numbers its own handles)."""
    return re.sub(r"Resident\(id=\d+", "Resident(id=#", message)


def misuses(backend) -> tuple[list[tuple[str, Callable[[], object], type]], list]:
    """The misuse cases on ``backend`` and the live handles they use (a 16-byte one and a 2-byte one)."""
    h, tiny = backend.allocate_resident(16), backend.allocate_resident(2)
    backend.upload_resident(h, np.arange(4, dtype=np.uint32))
    gone = backend.allocate_resident(8)
    backend.free_resident(gone)
    forged = Resident(h.id, h.nbytes, h.owner)
    steps = [(BUMP, [h])]
    cases = [
        ("download a freed handle", lambda: backend.download_resident(gone), InvalidHandle),
        ("free a freed handle", lambda: backend.free_resident(gone), InvalidHandle),
        ("upload to a forged handle", lambda: backend.upload_resident(forged, b"\0"), InvalidHandle),
        ("download a non-handle", lambda: backend.download_resident("handle"), InvalidHandle),
        ("dispatch a freed handle", lambda: backend.dispatch_resident(BUMP, [gone]), InvalidHandle),
        ("sequence with a freed handle", lambda: backend.dispatch_sequence([(BUMP, [gone])]), InvalidHandle),
        ("upload past the end", lambda: backend.upload_resident(h, b"\0" * 8, offset=12), InvalidHandle),
        ("upload at a negative offset", lambda: backend.upload_resident(h, b"\0", offset=-1), InvalidHandle),
        ("upload at a bool offset", lambda: backend.upload_resident(h, b"\0", offset=True), InvalidHandle),
        ("download past the end", lambda: backend.download_resident(h, 10, 8), InvalidHandle),
        ("download from past the end", lambda: backend.download_resident(h, 17), InvalidHandle),
        ("download a negative length", lambda: backend.download_resident(h, 0, -1), InvalidHandle),
        ("download a float length", lambda: backend.download_resident(h, 0, 4.0), InvalidHandle),
        ("sequence read past the end", lambda: backend.dispatch_sequence(steps, [(h, 8, 16)]), InvalidHandle),
        ("sequence read not a triple", lambda: backend.dispatch_sequence(steps, [(h, 0)]), InvalidProgram),
        ("sequence step not a pair", lambda: backend.dispatch_sequence([BUMP]), InvalidProgram),
        ("repeated read past the end", lambda: backend.dispatch_repeated(steps, steps, 2, [(h, 0, 17)]),
         InvalidHandle),
        ("repeated negative count", lambda: backend.dispatch_repeated(steps, steps, -1), InvalidProgram),
        ("repeated bool count", lambda: backend.dispatch_repeated(steps, steps, True), InvalidProgram),
        ("repeated float count", lambda: backend.dispatch_repeated(steps, steps, 2.0), InvalidProgram),
        ("until negative max_iterations", lambda: backend.dispatch_until(steps, h, -1), InvalidProgram),
        ("until bool max_iterations", lambda: backend.dispatch_until(steps, h, False), InvalidProgram),
        ("until a flag under 4 bytes", lambda: backend.dispatch_until(steps, tiny, 3), InvalidProgram),
        ("allocate a negative size", lambda: backend.allocate_resident(-1), InvalidProgram),
        ("allocate a bool size", lambda: backend.allocate_resident(True), InvalidProgram),
    ]
    return cases, [h, tiny]
