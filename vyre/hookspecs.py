"""The hook specifications (the public name ``vyre.hookspecs``); they live in ``vyre.driver.hookspecs``."""

from vyre.driver.hookspecs import *  # noqa: F403
from vyre.driver.hookspecs import __doc__ as _spec_doc

__doc__ = _spec_doc
