"""Virtual register allocation: numbered registers per PTX register class.

Every value gets a fresh register (SSA-like); ptxas does the real allocation, so copies the
emitter leaves behind (``mov`` into a variable's register) cost nothing after assembly.
"""

from __future__ import annotations

#: register class prefix -> PTX declaration type
REG_CLASSES: dict[str, str] = {"p": ".pred", "h": ".b16", "r": ".b32", "rd": ".b64"}


class Registers:
    """Hands out ``%p1``, ``%r7``, ``%rd3``... and declares exactly the ones used."""

    def __init__(self) -> None:
        self._used = dict.fromkeys(REG_CLASSES, 0)

    def new(self, kind: str) -> str:
        """A fresh register of class ``kind`` (``p``, ``h``, ``r`` or ``rd``)."""
        self._used[kind] += 1
        return f"%{kind}{self._used[kind]}"

    def declarations(self) -> list[str]:
        """The ``.reg`` lines covering every register handed out."""
        return [f".reg {REG_CLASSES[k]} %{k}<{n + 1}>;" for k, n in self._used.items() if n]
