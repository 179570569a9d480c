"""vyre: a GPU compute IR with a CPU reference oracle and pluggable backends."""

__version__ = "0.1.0"
