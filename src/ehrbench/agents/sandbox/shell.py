"""A terminal agent's shell command (the `run_shell` tool of workspace tasks), run confined in its task's workspace.

The command runs with /bin/sh in the OS sandbox of bubblewrap.py — the system's programs and this environment's
Python (with its packages: pandas, pyarrow, duckdb, scikit-learn, meds, ...), no network, no other processes, uid
nobody — with one writable folder, the workspace, bound at /workspace and made its working folder. What the command
writes there stays for the next command and for the verifier; nothing else it writes outlives it (/tmp is a tmpfs).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ehrbench.agents.sandbox import bubblewrap
from ehrbench.agents.sandbox.process import ProcessResult, run_bounded

# Sets the limits, then becomes the shell: the limits bind the command and everything it starts.
SHELL_BOOTSTRAP = """\
import json, os, resource, sys
config = json.loads(sys.argv[1])
for name, (soft, hard) in config["limits"].items():
    resource.setrlimit(getattr(resource, name), (soft, hard))
os.chdir(config["cwd"])
os.execv("/bin/sh", ["sh", "-c", sys.argv[2]])
"""


ShellResult = ProcessResult  # what a shell command printed and how it ended


def run_shell(command: str, workspace: Path, *, timeout_s: float = 120, memory_mb: int = 4096, cpu_s: int = 300,
              max_output_chars: int = 20000, max_file_mb: int = 1024, processes: int = 64,
              isolation: str | None = None) -> ShellResult:
    """Run `command` in `workspace` and return its output (each stream cut at max_output_chars).

    Confined (isolation "bubblewrap", the default) the workspace is /workspace; with "unsafe: ..." (--unsafe-sandbox)
    the command runs in the workspace itself with only the limits. Either way: a clean environment (no API keys),
    address space, CPU time, file size and process limits, and a wall-clock timeout that kills the whole group."""
    isolation = isolation or bubblewrap.isolation(allow_unsafe=False)
    confined = isolation == "bubblewrap"
    workspace = workspace.resolve()
    if not workspace.is_dir():
        raise FileNotFoundError(f"workspace {workspace} is not a folder")
    mb = 1024 * 1024
    limits = {"RLIMIT_AS": (memory_mb * mb, memory_mb * mb), "RLIMIT_CPU": (cpu_s, cpu_s + 1),
              "RLIMIT_FSIZE": (max_file_mb * mb, max_file_mb * mb), "RLIMIT_NPROC": (processes, processes),
              "RLIMIT_CORE": (0, 0)}
    config = {"limits": limits, "cwd": bubblewrap.WORKSPACE_DIR if confined else str(workspace)}
    argv = [sys.executable, "-I", "-S", "-c", SHELL_BOOTSTRAP, json.dumps(config), command]
    # this environment's Python (python, and the scripts of its packages) first on the PATH
    search_path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    single_threaded = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    if confined:
        argv = bubblewrap.confined_argv(argv, view={}, scratch_mb=max_file_mb, workspace=workspace,
                                        env={**single_threaded, "PATH": search_path})
    outputs = Path(tempfile.mkdtemp(prefix="ehrbench-shell-"))
    owner = _lend(workspace) if confined else None
    try:
        env = {"PATH": search_path, "LANG": "C.UTF-8", "HOME": str(workspace), "TMPDIR": str(outputs),
               **single_threaded}
        return run_bounded(argv, cwd=workspace, env=env, outputs=outputs, timeout_s=timeout_s, confined=confined,
                           max_output_chars=max_output_chars, hidden_path=workspace)
    finally:
        if owner is not None:
            _give_back(workspace, owner)
        shutil.rmtree(outputs, ignore_errors=True)


def _lend(workspace: Path) -> tuple[int, int] | None:
    """When the evaluator is root, the sandbox runs as nobody: the workspace is handed to nobody for the command
    (and back after it, `_give_back`). Unprivileged, the sandbox's user namespace maps nobody to the evaluator."""
    if os.geteuid() != 0:
        return None
    owner = (workspace.stat().st_uid, workspace.stat().st_gid)
    _chown_tree(workspace, bubblewrap.NOBODY, bubblewrap.NOBODY)
    return owner


def _give_back(workspace: Path, owner: tuple[int, int]) -> None:
    _chown_tree(workspace, *owner)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(Path(folder) / name, uid, gid, follow_symlinks=False)
