"""Which host arrays ``vyre_cuda._runtime.host_pins`` may page-lock (no GPU needed): only memory that
fills whole pages no other memory shares, so another library's copy of any slice of it, or of a
neighbour, never starts in a registered page and ends outside it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vyre_cuda._runtime.host_pins import CHUNK_HEADER, PAGE, exclusive_pages

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the chunk layout read is glibc's")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("extra", [0, 1, 5, 4093])
def test_an_array_past_32_mib_is_its_own_mapping(extra: int) -> None:
    a = np.empty((32 << 20) + extra, np.uint8)
    pages = exclusive_pages(a)
    assert pages is not None
    start, nbytes = pages
    assert start % PAGE == 0 and nbytes % PAGE == 0
    assert start == a.ctypes.data - CHUNK_HEADER  # glibc's header, then the array
    assert start + nbytes >= a.ctypes.data + a.nbytes > start + nbytes - PAGE  # its last page, no more


def test_small_arrays_share_their_pages() -> None:
    arrays = [np.empty(n, np.uint8) for n in (1, 100, 5000, 60000)]  # heap chunks, side by side
    assert all(exclusive_pages(a) is None for a in arrays)


def test_heap_arrays_share_their_pages() -> None:
    """With the mmap threshold raised (as glibc raises it by itself up to 32 MiB once large arrays
    are freed) an 8 MiB array is a heap chunk: not exclusive. Its own process: the setting is global.
    The sizes are not whole pages: a heap chunk of exactly 8 MiB whose memory happens to start on a
    page boundary does fill whole pages of its own (CI hit one once the imports before it moved the
    heap), and those are rightly exclusive."""
    script = (
        "import ctypes, numpy as np\n"
        "ctypes.CDLL(None).mallopt(-3, 64 << 20)\n"  # M_MMAP_THRESHOLD
        "from vyre_cuda._runtime.host_pins import exclusive_pages\n"
        "keep = [np.empty((8 << 20) + 1 + k, np.uint8) for k in range(3)]\n"
        "print(all(exclusive_pages(a) is None for a in keep))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0 and run.stdout.strip() == "True", run.stderr[-2000:]
