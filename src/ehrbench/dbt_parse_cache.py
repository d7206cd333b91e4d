"""dbt's parsed project kept across data directories, so a build in a new one does not parse ~700 nodes again.

dbt parses the project before every command (10 s cold on 2 cores, more than the staging models take to build) and
keeps the result in `<target>/partial_parse.msgpack`; the next command in the same target folder re-parses only the
files that changed. A new data directory has a new target folder, so its first build parsed everything. Here the
file is copied into a fresh target folder from a cache folder shared by every data directory, and back after a
command, under a key of what makes dbt parse everything again, so that the parses of different ones coexist instead
of replacing each other:
- the project folder (a second checkout has its own file paths),
- the warehouse file's name (a profile value: dbt-duckdb names the database after it),
- the vars (a key per set of vars keeps several seeds' parses).
dbt still checks the copied file itself — dbt version, vars, profile values, project files' hashes — and parses what
differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

PARSE_FILE = "partial_parse.msgpack"  # dbt's name for it in the target folder


def parse_key(project_dir: Path, warehouse: Path, vars: dict | None) -> str:
    """The cache key of a dbt command's parse: see the module docstring."""
    from dbt.version import __version__ as dbt_version

    described = json.dumps({"dbt": dbt_version, "project": str(project_dir.resolve()), "database": warehouse.stem,
                            "vars": vars or {}}, sort_keys=True)
    return hashlib.sha256(described.encode()).hexdigest()[:24]


def restore_parse(cache_dir: Path, key: str, target_dir: Path) -> bool:
    """Copy the cached parse into a target folder that has none; True when it did."""
    cached, target = cache_dir / key / PARSE_FILE, target_dir / PARSE_FILE
    if target.exists() or not cached.is_file():
        return False
    target_dir.mkdir(parents=True, exist_ok=True)
    _copy_atomically(cached, target)
    return True


def keep_parse(cache_dir: Path, key: str, target_dir: Path) -> None:
    """Copy a target folder's parse into the cache (replacing the key's older one whole, never half-written)."""
    parsed = target_dir / PARSE_FILE
    if not parsed.is_file():
        return
    try:
        (cache_dir / key).mkdir(parents=True, exist_ok=True)
        _copy_atomically(parsed, cache_dir / key / PARSE_FILE)
    except OSError:  # a read-only or full cache folder costs the next build its parse, not this build
        pass


def _copy_atomically(source: Path, destination: Path) -> None:
    """A reader (another build, a parallel test worker) sees the old file or the new one, never a partial copy."""
    fd, temporary = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.")
    os.close(fd)
    try:
        shutil.copyfile(source, temporary)
        os.replace(temporary, destination)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
