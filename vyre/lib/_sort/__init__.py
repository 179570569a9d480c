"""Sorting: ``sort`` (keys, or keys with values), ``argsort`` and ``segmented_sort``.

``tiles`` is the radix tile both plans share, ``kernels`` the segmented passes and the
gathers of sorts through indices, ``onesweep`` the single-pass passes, ``topology`` the choice
of plan and its steps (also used by ``unique`` and the workloads), ``api`` the public calls.
"""

from vyre.lib._sort.api import argsort, segmented_sort, sort

__all__ = ["argsort", "segmented_sort", "sort"]


