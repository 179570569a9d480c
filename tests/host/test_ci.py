"""CI runs exactly the README's test command, and that command lints and runs the suite in parallel."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)


def test_ci_runs_the_readme_test_command() -> None:
    test_commands = [c for c in _readme_commands() if "pytest" in c]
    assert len(test_commands) == 1, test_commands
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip("\n").splitlines()
    assert script[-1] == test_commands[0]  # its last line, so its exit status is the script's


def test_both_readme_commands_install_into_a_venv() -> None:
    """Debian's and Ubuntu's own python3 refuse ``pip install`` outside a venv (PEP 668)."""
    install, test = [c for c in _readme_commands() if "pip install -e" in c][:2]
    for command in (install, test):
        assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && python3 -m pip install -e ")
    assert "ruff check" in test and "pytest -q -n auto" in test
    assert "&& basedpyright &&" in test and "mkdocs build --strict" in test  # the type check and the docs site
