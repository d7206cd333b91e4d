"""Agent-written Python (FHIR-AgentBench's execute_python), run confined over the resources it retrieved."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ehrbench.agents.sandbox import audit_hook, bubblewrap


@dataclass(frozen=True)
class PythonResult:
    stdout: str
    stderr: str
    exit_status: int | None  # negative: killed by that signal
    timed_out: bool
    killed_reason: str | None


def run_python(code: str, *, inputs: dict[str, str | bytes] | None = None, timeout_s: float = 10,
               memory_mb: int = 512, cpu_s: int = 10, max_output_chars: int = 20000,
               max_file_mb: int = 32, isolation: str | None = None) -> PythonResult:
    """Run agent-written Python in a child process whose working folder holds `inputs` (read-only) and room to
    write max_file_mb.

    What confines it:
    - the operating system (bubblewrap.py; `isolation` "bubblewrap", the default): it sees the Python installation,
      its inputs and an empty writable /tmp, nothing else; no network, no other processes, uid nobody. With
      isolation "unsafe: ..." (the user passed --unsafe-sandbox) it runs in a fresh temporary folder without that;
    - resource limits set in the child before the agent's code runs: address space (memory_mb), CPU time, open
      files, file size (max_file_mb, also bounding stdout/stderr), core dumps off, and a small process count;
    - a wall-clock timeout that kills the child and everything it started;
    - an environment with no variables of the parent (no API keys, no proxies), Python in isolated mode;
    - the audit hook of audit_hook.py, a second layer inside the process.
    """
    isolation = isolation or bubblewrap.isolation(allow_unsafe=False)
    confined = isolation == "bubblewrap"
    inputs = inputs or {}
    for name in inputs:
        if Path(name).name != name or name in {".", "..", "main.py"}:
            raise ValueError(f"input name {name!r} must be a plain file name other than main.py")
    mb = 1024 * 1024
    limits = {
        "RLIMIT_AS": (memory_mb * mb, memory_mb * mb),
        "RLIMIT_CPU": (cpu_s, cpu_s + 1),  # SIGXCPU at the soft limit, SIGKILL a second later
        "RLIMIT_NPROC": (audit_hook.MAX_PROCESSES, audit_hook.MAX_PROCESSES),
        "RLIMIT_FSIZE": (max_file_mb * mb, max_file_mb * mb),
        "RLIMIT_NOFILE": (audit_hook.MAX_OPEN_FILES, audit_hook.MAX_OPEN_FILES),
        "RLIMIT_CORE": (0, 0),
    }
    root = Path(tempfile.mkdtemp(prefix="ehrbench-python-"))
    try:
        work = root / "work"
        work.mkdir()
        for name, content in inputs.items():
            (work / name).write_bytes(content.encode() if isinstance(content, str) else content)
        (work / "main.py").write_text(code, encoding="utf-8")
        config = {"work": bubblewrap.SCRATCH_DIR if confined else str(work), "limits": limits,
                  "packages": sorted(audit_hook.ALLOWED_PACKAGES), "blocked": sorted(audit_hook.BLOCKED_MODULES),
                  "denied_events": sorted(audit_hook.DENIED_EVENTS)}
        argv = [sys.executable, "-I", "-B", "-u", "-c", audit_hook.BOOTSTRAP, json.dumps(config)]
        single_threaded = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # pools would hit the process limit
        if confined:
            argv = bubblewrap.confined_argv(argv, view={}, scratch_mb=max_file_mb, env=single_threaded,
                                            scratch_files={p.name: p for p in work.iterdir()})
        env = {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": str(work), "TMPDIR": str(work), **single_threaded}
        with (root / "stdout").open("wb") as stdout, (root / "stderr").open("wb") as stderr:
            process = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
                                       stderr=stderr, start_new_session=True, close_fds=True)
            timed_out = False
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
                process.wait()
        status = process.returncode
        if confined and status is not None and status > 128:  # bwrap reports a child killed by signal N as 128 + N
            status = -(status - 128)
        return PythonResult(stdout=_read_output(root / "stdout", max_output_chars, work),
                            stderr=_read_output(root / "stderr", max_output_chars, work),
                            exit_status=status, timed_out=timed_out,
                            killed_reason=_killed_reason(status, timed_out, timeout_s))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _kill_group(process: subprocess.Popen) -> None:
    """The child's process group; under bubblewrap its pid namespace goes with it (--die-with-parent)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _killed_reason(status: int | None, timed_out: bool, timeout_s: float) -> str | None:
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


def _read_output(path: Path, max_chars: int, work: Path) -> str:
    with path.open("rb") as handle:
        data = handle.read(max_chars * 4 + 4)
        more = bool(handle.read(1))
    text = data.decode("utf-8", errors="replace").replace(str(work) + os.sep, "").replace(str(work), ".")
    if len(text) > max_chars or more:
        return text[:max_chars] + "\n[output truncated]"
    return text
