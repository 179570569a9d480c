"""Filesystem safety for the on-disk caches (the kernel cache of ``vyre_cuda``, the specialisation cache
of ``vyre.frontend.spec_cache``): ssh-style trust checks and a bounded, link-free tree walk.

A cache directory or file is trusted only when this user owns it and neither group nor others may
write it (as ssh demands of ``~/.ssh``): anyone else who could write there could plant a kernel.
Every directory above it must be owned by this user or root and be writable by no one else unless
it is sticky like ``/tmp`` (``parent_problem``): whoever can write a parent can rename the
directory away and put their own in its place. A whole tree (the driver's JIT cache) is checked
entry by entry (``tree_problems``); a symlink in it is refused, as nothing we trust makes one.
The walk opens every directory relative to its parent with ``O_NOFOLLOW``, keeps its own stack
(no recursion, so no ``RecursionError`` on a deep tree) and stops at ``MAX_TREE_DEPTH`` levels or
``MAX_TREE_ENTRIES`` entries, so a hostile tree costs bounded time, memory and descriptors.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Callable, Iterator

#: directories deeper than this under a walked root are not entered
MAX_TREE_DEPTH = 32
#: a walk stops after this many entries
MAX_TREE_ENTRIES = 100_000
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW


class UntrustedCache(OSError):
    """A cache directory or entry that someone else could have written: refused, never read."""

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EPERM, reason)


def trust_problem(st: os.stat_result, what: str) -> str | None:
    """Why a file or directory with status ``st`` must not be trusted, or None when it may."""
    me = os.geteuid()
    if st.st_uid != me:
        return f"{what} is owned by uid {st.st_uid}, not by this user (uid {me})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def parent_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a directory above ``path`` (as written, and with links resolved) lets someone else replace
    ``path``, or None: each must be owned by this user or root, and group/other-writable only if sticky."""
    me = os.geteuid()
    for parent in _ancestors(path):
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            continue  # created by us later, 0o700
        except OSError as exc:
            return f"{parent}, a parent of {path}, cannot be checked ({exc.strerror})"
        if st.st_uid not in (me, 0):
            return f"{parent}, a parent of {path}, is owned by uid {st.st_uid}, not by this user (uid {me}) or root"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            return (f"{parent}, a parent of {path}, is writable by group or others without the sticky bit "
                    f"(mode {stat.S_IMODE(st.st_mode):o})")
    return None


def _ancestors(path: str | os.PathLike[str]) -> list[str]:
    """Every directory above ``path``, nearest first: along the path as written and along its resolved form."""
    found: list[str] = []
    for start in (os.path.abspath(path), os.path.realpath(path)):
        parent = os.path.dirname(start)
        while parent not in found:
            found.append(parent)
            parent = os.path.dirname(parent)
    return found


def open_private_dir(path: str | os.PathLike[str], what: str) -> int:
    """``open_trusted_dir`` of ``path`` after ``parent_problem``: a directory only this user can change."""
    problem = parent_problem(path)
    if problem is not None:
        raise UntrustedCache(problem)
    return open_trusted_dir(path, what)


def tree_problems(top_fd: int, what: str) -> list[str]:
    """Why entries under directory ``top_fd`` (named ``what``) must not be trusted: ``trust_problem`` of every
    file and directory, and every symlink, found by a bounded ``TreeWalk``; empty when all pass."""
    found: list[str] = []
    for _, name, st in TreeWalk().walk(top_fd):
        if stat.S_ISLNK(st.st_mode):
            found.append(f"{name!r} in {what} is a symbolic link")
        elif (problem := trust_problem(st, f"{name!r} in {what}")) is not None:
            found.append(problem)
    return found


def open_trusted_dir(name: str | os.PathLike[str], what: str, dir_fd: int | None = None) -> int:
    """A descriptor of directory ``name`` (never via a symlink); ``UntrustedCache`` if ``trust_problem`` says so."""
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    problem = trust_problem(os.fstat(fd), what)
    if problem is not None:
        os.close(fd)
        raise UntrustedCache(problem)
    return fd


class TreeWalk:
    """One bounded walk; ``complete`` is False when it stopped at a limit."""

    def __init__(self, max_depth: int = MAX_TREE_DEPTH, max_entries: int = MAX_TREE_ENTRIES) -> None:
        self.max_depth, self.max_entries = max_depth, max_entries
        self.entries = 0
        self.complete = True

    def walk(self, top_fd: int, descend: Callable[[str], object] = lambda name: True
             ) -> Iterator[tuple[int, str, os.stat_result]]:
        """``(parent_fd, name, lstat)`` for everything under ``top_fd``, a directory after its contents.

        Symlinks are reported, never followed. Only directories for which ``descend(name)`` is truthy
        are entered. ``parent_fd`` stays open until the consumer asks for the next item.
        """
        stack: list[tuple[int, Iterator[os.DirEntry[str]], str, os.stat_result | None]] = []
        stack.append((os.dup(top_fd), self._entries(top_fd), "", None))
        try:
            while stack:
                fd, it, name, st = stack[-1]
                entry = next(it, None)
                if entry is None:
                    stack.pop()
                    if stack and st is not None:
                        yield stack[-1][0], name, st
                    os.close(fd)
                    continue
                self.entries += 1
                if self.entries > self.max_entries:
                    self.complete = False
                    return
                try:
                    child_st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISDIR(child_st.st_mode):
                    yield fd, entry.name, child_st
                elif not descend(entry.name):
                    continue
                elif len(stack) > self.max_depth:
                    self.complete = False
                else:
                    try:
                        child = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        continue
                    stack.append((child, self._entries(child), entry.name, child_st))
        finally:
            for fd, *_ in stack:
                os.close(fd)


    def _entries(self, fd: int) -> Iterator[os.DirEntry[str]]:
        """Directory ``fd``'s entries, read at once but no more than the walk may still visit."""
        try:
            with os.scandir(fd) as it:
                return iter(list(itertools.islice(it, self.max_entries - self.entries + 1)))
        except OSError:
            return iter(())


__all__ = ["DIR_FLAGS", "MAX_TREE_DEPTH", "MAX_TREE_ENTRIES", "TreeWalk", "UntrustedCache", "open_private_dir",
           "open_trusted_dir", "parent_problem", "tree_problems", "trust_problem"]
