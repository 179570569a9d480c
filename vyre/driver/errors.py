"""Errors of the vyre runtime. Every message ends with an actionable ``Fix: ...`` sentence."""

from __future__ import annotations


class VyreError(Exception):
    """Base of every vyre error: ``message`` says what failed, ``fix`` what to do about it."""

    default_fix = "see docs/troubleshooting.md."

    def __init__(self, message: str, fix: str | None = None) -> None:
        self.message = message
        self.fix = fix or self.default_fix
        super().__init__(f"{message}. Fix: {self.fix}" if not message.endswith(".") else f"{message} Fix: {self.fix}")


class ValidationError(VyreError):
    """A program (or wire/text input) is invalid; ``findings`` lists every problem found."""

    def __init__(self, findings: list | tuple | str, fix: str | None = None) -> None:
        if isinstance(findings, str):
            findings = [Finding("invalid", findings, fix or "correct the input.")]
        self.findings = tuple(findings)
        lines = [f"[{f.code}] {f.message}. Fix: {f.fix}." for f in self.findings]
        summary = f"{len(self.findings)} validation finding(s):\n  " + "\n  ".join(lines)
        first_fix = self.findings[0].fix if self.findings else "correct the program."
        self.message = summary
        self.fix = first_fix
        Exception.__init__(self, summary)

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(f.code for f in self.findings)


class Finding:
    """One validation finding: stable ``code``, ``message``, ``fix`` sentence, optional ``path``."""

    __slots__ = ("code", "message", "fix", "path")

    def __init__(self, code: str, message: str, fix: str, path: str = "") -> None:
        self.code, self.message, self.fix, self.path = code, message, fix.rstrip("."), path

    def __repr__(self) -> str:
        return f"Finding({self.code!r}, {self.message!r})"


class UnsupportedFeature(VyreError):
    """A backend cannot run something a program uses (an op, a type, subgroups...)."""

    def __init__(self, name: str, backend: str, fix: str | None = None) -> None:
        self.name, self.backend = name, backend
        super().__init__(f"backend {backend!r} does not support {name}",
                         fix or f"use a backend that supports {name} (see `vyre backends`) "
                         "or rewrite the program without it.")


class DeviceOutOfMemory(VyreError):
    def __init__(self, requested: int, available: int, fix: str | None = None) -> None:
        self.requested, self.available = requested, available
        super().__init__(f"device out of memory: requested {requested} bytes, {available} available",
                         fix or "free resident buffers, lower the problem size or raise VYRE_CUDA_MEMORY_LIMIT.")


class KernelCompileFailed(VyreError):
    def __init__(self, backend: str, message: str, fix: str | None = None) -> None:
        self.backend = backend
        super().__init__(f"{backend}: kernel failed to compile/load: {message}",
                         fix or "report the program (vyre emit-ptx FILE.vyre) with this message; "
                         "set VYRE_PTX_DUMP_DIR to keep the PTX.")


class DispatchFailed(VyreError):
    def __init__(self, code: int | str, message: str, fix: str | None = None) -> None:
        self.code = code
        super().__init__(f"dispatch failed ({code}): {message}",
                         fix or "rerun with VYRE_CUDA_SYNC_EACH=1 to name the failing program.")


class InvalidProgram(VyreError):
    default_fix = "run vyre.validate(program) and correct the findings."


class InvalidHandle(VyreError):
    default_fix = "use handles only with the backend that made them, and not after free_resident."


class BackendUnavailable(VyreError):
    """A backend could not start; ``reason`` (when set) is the factory's own words, for listings."""

    reason: str
    default_fix = "run `vyre backends` to see which backends can start and why."


class InvalidSetting(VyreError):
    """An environment variable (``VYRE_*``) holds a value outside the ones it accepts."""

    def __init__(self, name: str, value: str, accepted: str, problem: str = "is not valid") -> None:
        self.name, self.value, self.accepted = name, value, accepted
        super().__init__(f"{name}={value!r} {problem}", f"set {name} to {accepted}, or unset it")


class DeviceLost(VyreError):
    default_fix = "the device context is unusable: acquire a new backend (vyre.acquire()) and rerun."


__all__ = [
    "BackendUnavailable", "DeviceLost", "DeviceOutOfMemory", "DispatchFailed", "Finding",
    "InvalidHandle", "InvalidProgram", "InvalidSetting", "KernelCompileFailed", "UnsupportedFeature",
    "ValidationError", "VyreError",
]
