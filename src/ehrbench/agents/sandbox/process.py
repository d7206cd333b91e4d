"""Running a confined program to its end or its wall-clock limit, and reading back its bounded output: what agent
Python (python.py) and a terminal agent's shell commands (shell.py) share."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessResult:
    stdout: str
    stderr: str
    exit_status: int | None  # negative: killed by that signal
    timed_out: bool
    killed_reason: str | None


def run_bounded(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], outputs: Path, timeout_s: float,
                confined: bool, max_output_chars: int, hidden_path: Path) -> ProcessResult:
    """Run `argv` in a session of its own with stdout and stderr in files under `outputs`; past `timeout_s` kill
    its whole process group. Outputs are cut at max_output_chars and never show `hidden_path` (a host folder)."""
    with (outputs / "stdout").open("wb") as stdout, (outputs / "stderr").open("wb") as stderr:
        process = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=stdout,
                                   stderr=stderr, start_new_session=True, close_fds=True)
        timed_out = False
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(process)
            process.wait()
    status = process.returncode
    if confined and status is not None and status > 128:  # bwrap reports a child killed by signal N as 128 + N
        status = -(status - 128)
    return ProcessResult(stdout=read_output(outputs / "stdout", max_output_chars, hidden_path),
                         stderr=read_output(outputs / "stderr", max_output_chars, hidden_path),
                         exit_status=status, timed_out=timed_out,
                         killed_reason=killed_reason(status, timed_out, timeout_s))


def kill_group(process: subprocess.Popen) -> None:
    """The child's process group; under bubblewrap its pid namespace goes with it (--die-with-parent)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def killed_reason(status: int | None, timed_out: bool, timeout_s: float) -> str | None:
    if timed_out:
        return f"wall-clock timeout after {timeout_s:g} s"
    if status is None or status >= 0:
        return None
    with contextlib.suppress(ValueError):
        name = signal.Signals(-status).name
        if -status in (signal.SIGXCPU, signal.SIGKILL):
            return f"CPU time limit ({name})"
        return f"killed by {name}"
    return f"killed by signal {-status}"


def read_output(path: Path, max_chars: int, hidden_path: Path) -> str:
    with path.open("rb") as handle:
        data = handle.read(max_chars * 4 + 4)
        more = bool(handle.read(1))
    text = (data.decode("utf-8", errors="replace").replace(str(hidden_path) + os.sep, "")
            .replace(str(hidden_path), "."))
    if len(text) > max_chars or more:
        return text[:max_chars] + "\n[output truncated]"
    return text
