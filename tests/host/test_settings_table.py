"""Every environment variable is read through a settings module and listed in docs/troubleshooting.md."""

from __future__ import annotations

import re

from tests.imports import ROOT, modules
from vyre import settings as host
from vyre_cuda._runtime import settings as cuda

SETTINGS_MODULES = {"vyre.settings", "vyre_cuda._runtime.settings"}
# modules that read variables of other programs (never a ``VYRE_*`` one)
FOREIGN = {"vyre.dask": "CUDA_VISIBLE_DEVICES", "vyre_cuda.cli": "CUDA_CACHE_PATH",
           "vyre_cuda._runtime.cache": "CUDA_CACHE_PATH, XDG_CACHE_HOME", "vyre_cuda._runtime.profiler": "injection",
           "vyre_cuda.bench": "OUT, the child's environment"}


def _host_names() -> set[str]:
    return {v for k, v in vars(host).items() if k.isupper() and isinstance(v, str) and v.startswith("VYRE_")}


def test_only_the_settings_modules_read_the_environment():
    readers = sorted(name for name, path in modules("vyre", "vyre_cuda").items()
                     if name not in SETTINGS_MODULES and name not in FOREIGN
                     and re.search(r"os\.environ|getenv", path.read_text(encoding="utf-8")))
    assert not readers, f"read the environment through vyre.settings or vyre_cuda._runtime.settings: {readers}"


def test_foreign_readers_read_no_vyre_variable():
    for name in FOREIGN:
        text = modules("vyre", "vyre_cuda")[name].read_text(encoding="utf-8")
        assert not re.search(r"environ(\.get)?[\[(]\s*\"VYRE_", text), name


def test_the_docs_table_lists_every_setting():
    text = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(VYRE_\w+)` \|", text, re.MULTILINE))
    assert listed == _host_names() | set(cuda.READERS)
