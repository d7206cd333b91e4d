"""Agent-written Python (FHIR-AgentBench's execute_python), run confined over the resources it retrieved."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ehrbench.agents.sandbox import audit_hook, bubblewrap
from ehrbench.agents.sandbox.process import ProcessResult, run_bounded

PythonResult = ProcessResult  # what agent Python printed and how it ended


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
        return run_bounded(argv, cwd=work, env=env, outputs=root, timeout_s=timeout_s, confined=confined,
                           max_output_chars=max_output_chars, hidden_path=work)
    finally:
        shutil.rmtree(root, ignore_errors=True)
