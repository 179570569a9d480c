"""``vyre.errors`` is a real module: importable by name, the same classes everywhere."""

from __future__ import annotations

import subprocess
import sys


def test_vyre_errors_imports_as_a_module_in_a_fresh_interpreter():
    code = ("import vyre.errors\n"
            "from vyre.errors import ValidationError, VyreError, InvalidProgram, Finding\n"
            "import vyre, vyre.driver.errors as d\n"
            "assert vyre.errors.__name__ == 'vyre.errors'\n"
            "assert ValidationError is d.ValidationError and issubclass(InvalidProgram, VyreError)\n"
            "assert sorted(vyre.errors.__all__) == sorted(d.__all__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_package_attribute_is_the_module():
    import vyre
    import vyre.errors

    assert vyre.errors is sys.modules["vyre.errors"]
    assert vyre.errors.ValidationError("bad").message.startswith("1 validation finding")
