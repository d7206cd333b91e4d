"""Running the `ehrbench` command of this environment from tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EHRBENCH = str(Path(sys.executable).with_name("ehrbench"))


def run_cli(args: list[str], env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([EHRBENCH, *args], env=env, capture_output=True, text=True, timeout=timeout)


def error_line(text: str) -> str:
    """The CLI's own one-line error (Prefect's run logs may surround it)."""
    lines = [line for line in text.splitlines() if line.startswith("ehrbench: error:")]
    assert len(lines) == 1, text[-3000:]
    return lines[0]
