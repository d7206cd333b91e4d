"""Operating-system isolation for what agents run, with bubblewrap (Debian's `bubblewrap`).

An audit hook inside the agent's own Python cannot list every system call (a hostile test wrote into the build with
os.mknod, signalled the evaluator with pidfd_send_signal, read /etc/shadow through spwd). So agent code and agent SQL
run in a child process that the kernel confines:

- a new mount namespace whose root is an empty tmpfs holding read-only binds of exactly: the system libraries
  (/usr), the Python installation and virtual environment, and the files of the agent's own view (its database, its
  resources) — nothing else of the build, the results or the home folder; a private writable /tmp of a fixed size;
- no network (an empty network namespace), no other processes (a pid namespace: the evaluator cannot be named, let
  alone signalled), its own IPC and hostname;
- an unprivileged user: uid 65534 (nobody) with no capabilities and no_new_privs. When the evaluator runs as root,
  bubblewrap sets up the mounts as root and `setpriv` drops to the real uid 65534 before Python starts, so the
  per-user process limit binds (a user namespace would leave the kernel's uid 0 behind the sandbox's 65534);
- killed with the evaluator (--die-with-parent) and in a session of its own, so the caller's timeout kills it all.

Resource limits (memory, CPU time, processes, file size) are set by the confined program itself before it runs
anything of the agent's (see the bootstraps of python.py and sql_worker.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

from ehrbench.errors import EhrbenchError

NOBODY = 65534
# Mount points inside the sandbox for what the agent may see.
VIEW_DIR = "/view"
SCRATCH_DIR = "/tmp"
WORKSPACE_DIR = "/workspace"  # a terminal agent's task folder, the one writable folder it keeps
_PROBE_TIMEOUT_S = 20


class SandboxUnavailable(EhrbenchError):
    """bubblewrap cannot isolate agent code on this machine and unsafe execution was not asked for."""


@functools.cache
def unavailable_reason() -> str | None:
    """Why bubblewrap cannot run a confined Python here (None: it can). Probed once per process by running one."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (Debian: apt-get install bubblewrap; `make sandbox` does it)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing: it drops root to an unprivileged uid inside the sandbox"
    try:
        probe = subprocess.run(confined_argv([sys.executable, "-I", "-S", "-c", "pass"], view={}),
                               capture_output=True, timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap did not start: {exc}"
    if probe.returncode != 0:
        detail = probe.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {probe.returncode}"]
        return f"bubblewrap cannot create the sandbox here ({detail[0]}); are user namespaces disabled?"
    return None


def isolation(allow_unsafe: bool) -> str:
    """The isolation agent code gets: "bubblewrap", or "unsafe: <why>" when bubblewrap cannot run and the user said
    --unsafe-sandbox. Without that flag an unusable bubblewrap is an error saying what to do."""
    reason = unavailable_reason()
    if reason is None:
        return "bubblewrap"
    if allow_unsafe:
        return f"unsafe: {reason}"
    raise SandboxUnavailable(f"agent code cannot be isolated: {reason}. Fix that, or pass --unsafe-sandbox "
                             "(unsafe_sandbox=True) to run it with only the in-process checks; every result row "
                             "then records it")


def confined_argv(argv: Sequence[str], *, view: Mapping[str, Path], scratch_mb: int = 64,
                  scratch_files: Mapping[str, Path] | None = None, env: Mapping[str, str] | None = None,
                  workspace: Path | None = None) -> list[str]:
    """The bwrap command line that runs `argv` confined, in the writable scratch folder /tmp. `view` maps names to
    host files or folders, each bound read-only at /view/<name>; `scratch_files` are bound read-only into /tmp
    (inputs the program finds in its working folder); `env` is its whole environment besides PATH, LANG, HOME and
    TMPDIR. `workspace`: a host folder bound writable at /workspace (a terminal agent's task folder; the caller makes
    it nobody's and changes into it once it runs as nobody: bubblewrap itself, without capabilities, may not).
    argv[0] must be the Python of this environment (it is bound with its libraries)."""
    args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv", "--hostname", "sandbox"]
    root = os.geteuid() == 0
    if root:  # setpriv needs these to drop to nobody; it then clears every capability (bounding set included)
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    else:  # an unprivileged user gets its user namespace, and may not nest another one
        args += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--disable-userns"]
    mounts = _system_mounts() + [(str(path), f"{VIEW_DIR}/{name}") for name, path in sorted(view.items())]
    args += _parents([target for _, target in mounts])
    for source, target in mounts:
        args += ["--ro-bind", source, target]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(scratch_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", SCRATCH_DIR]
    for name, path in sorted((scratch_files or {}).items()):
        args += ["--ro-bind", str(path), f"{SCRATCH_DIR}/{name}"]
    if workspace is not None:
        args += ["--bind", str(workspace), WORKSPACE_DIR]
    args += ["--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", SCRATCH_DIR,
             "--setenv", "TMPDIR", SCRATCH_DIR, "--chdir", SCRATCH_DIR]
    for name, value in sorted((env or {}).items()):
        args += ["--setenv", name, value]
    if root:
        args += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all", "--no-new-privs", "--"]
    return args + list(argv)


def _system_mounts() -> list[tuple[str, str]]:
    """(host, sandbox) read-only binds for the interpreter: /usr with its merged-/usr links, the Python installation
    and the virtual environment, each at its own path so that the interpreter finds itself where it was built."""
    mounts = [("/usr", "/usr")]
    for path in sorted(_python_roots()):
        if not path.startswith("/usr/"):
            mounts.append((path, path))
    return mounts


@functools.cache
def _python_roots() -> frozenset[str]:
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    real = {os.path.realpath(p) for p in prefixes} | {str(Path(sys.executable).parent.parent)}
    # keep the outermost of nested roots (a venv's site-packages lies inside the venv)
    return frozenset(p for p in real if not any(p != q and p.startswith(q + "/") for q in real))


def _parents(targets: list[str]) -> list[str]:
    """Create the folders above each mount point as 0755: bubblewrap makes them 0700 when it runs as root, and the
    unprivileged user could not walk through them. Then the merged-/usr links of Debian."""
    folders = sorted({str(parent) for target in targets for parent in Path(target).parents if str(parent) != "/"})
    args: list[str] = []
    for folder in folders:
        args += ["--perms", "0755", "--dir", folder]
    for name in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{name}"):
            args += ["--symlink", os.readlink(f"/{name}").lstrip("/"), f"/{name}"]
        elif os.path.isdir(f"/{name}"):
            args += ["--ro-bind", f"/{name}", f"/{name}"]
    return args
