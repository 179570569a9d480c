"""``histogram``: counts of the values in ``[0, bins)``.

``kernels`` builds the program, ``topology`` the steps, ``api`` the public call.
"""

from vyre.lib._histogram.api import histogram

__all__ = ["histogram"]


