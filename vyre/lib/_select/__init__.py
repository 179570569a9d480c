"""Stable compaction: ``select`` (by flags) and ``select_if`` (by a value range).

``kernels`` builds the programs (``Predicate``: which elements are kept), ``topology`` the steps
(also used by run-length encoding), ``api`` the public calls.
"""

from vyre.lib._select.api import select, select_if

__all__ = ["select", "select_if"]


