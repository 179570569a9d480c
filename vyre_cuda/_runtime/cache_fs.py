"""The kernel cache's filesystem safety: ``vyre.driver.cache_fs``, shared with the host half's
specialisation cache (the host half holds it: ``vyre`` never imports ``vyre_cuda``)."""

from vyre.driver.cache_fs import (
    DIR_FLAGS,
    MAX_TREE_DEPTH,
    MAX_TREE_ENTRIES,
    TreeWalk,
    UntrustedCache,
    open_private_dir,
    open_trusted_dir,
    parent_problem,
    tree_problems,
    trust_problem,
)

__all__ = ["DIR_FLAGS", "MAX_TREE_DEPTH", "MAX_TREE_ENTRIES", "TreeWalk", "UntrustedCache", "open_private_dir",
           "open_trusted_dir", "parent_problem", "tree_problems", "trust_problem"]
