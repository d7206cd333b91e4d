"""A build's `.tmp` staging folder: removed when the build fails, and — when the build was killed — by the next build,
which names what it removed; never the folder of a build that is still running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from ehrbench.layout import DataLayout
from ehrbench.publish import publish, remove_unfinished_builds, staging_dir
from ehrbench.warehouse import build_lock, holds_build_lock

from .test_publish import _manifest
from .test_warehouse_lock import HOLD_LOCK, other_process

# A build that stages its folder under the lock and is then killed (SIGKILL: no `except`, no `finally`).
STAGE_AND_WAIT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ehrbench.publish import staging_dir
    from ehrbench.warehouse import build_lock
    data = Path(sys.argv[1])
    with build_lock(data / "build.lock", sys.argv[2]):
        (staging_dir(data / "benchmarks", sys.argv[2]) / "db.duckdb").write_bytes(b"x" * 1000)
        print("ready", flush=True)
        sys.stdin.readline()
""")


def _killed_build(data, build_id: str) -> int:
    """Stage `build_id` in another process and kill it there; its pid."""
    with other_process(STAGE_AND_WAIT, data, build_id) as proc:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return proc.pid


def test_the_owner_is_recorded_while_staging_and_left_out_of_the_published_build(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    folder = staging_dir(benchmarks, "b1")
    owner = json.loads((folder / ".owner.json").read_text())
    assert owner["pid"] == os.getpid() and owner["build_id"] == "b1" and owner["started_at"].startswith("20")
    final = publish(benchmarks, _manifest("b1"))
    assert sorted(p.name for p in final.iterdir()) == ["manifest.json"]


def test_the_next_build_removes_a_killed_builds_folder_and_says_whose_it_was(tmp_path):
    data = tmp_path / "data"
    layout = DataLayout(root=data)
    pid = _killed_build(data, "20261120T100000Z")
    stale = layout.benchmarks / "20261120T100000Z.tmp"
    assert (stale / "db.duckdb").is_file()  # what a kill leaves behind
    started = json.loads((stale / ".owner.json").read_text())["started_at"]

    with build_lock(layout.build_lock, "20261120T110000Z"):
        removed = remove_unfinished_builds(layout.benchmarks, layout.build_lock)

    assert [r.removed_line() for r in removed] == [
        f"removed stale {stale} from a build that did not finish (pid {pid}/started {started})"]
    assert not stale.exists()


def test_published_builds_links_and_folders_outside_stay(tmp_path):
    layout = DataLayout(root=tmp_path / "data")
    staging_dir(layout.benchmarks, "b1")
    published = publish(layout.benchmarks, _manifest("b1"))
    legacy = layout.benchmarks / "20261119T080000Z.tmp"  # staged before owners were recorded
    legacy.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (layout.benchmarks / "linked.tmp").symlink_to(outside)

    with build_lock(layout.build_lock, "b2"):
        removed = remove_unfinished_builds(layout.benchmarks, layout.build_lock)

    assert [r.removed_line() for r in removed] == [
        f"removed stale {legacy} from a build that did not finish (pid unknown/started 20261119T080000Z)"]
    assert (published / "manifest.json").is_file() and (layout.benchmarks / "latest").resolve() == published
    assert (outside / "keep.txt").read_text() == "mine" and (layout.benchmarks / "linked.tmp").is_symlink()


def test_a_running_builds_folder_is_never_removed(tmp_path):
    """Another process builds (holds the lock, stages its folder): this process may not clean, with or without
    having tried to take the lock."""
    layout = DataLayout(root=tmp_path / "data")
    with other_process(HOLD_LOCK, layout.build_lock, "running"):
        running = staging_dir(layout.benchmarks, "running")
        assert not holds_build_lock(layout.build_lock)
        with pytest.raises(RuntimeError, match="needs the build lock held by this process"):
            remove_unfinished_builds(layout.benchmarks, layout.build_lock)
        assert running.is_dir()


def test_cleaning_without_the_lock_is_refused_even_when_nobody_builds(tmp_path):
    layout = DataLayout(root=tmp_path / "data")
    stale = staging_dir(layout.benchmarks, "old")
    with build_lock(layout.build_lock, "done"):
        pass
    assert not holds_build_lock(layout.build_lock)
    with pytest.raises(RuntimeError):
        remove_unfinished_builds(layout.benchmarks, layout.build_lock)
    assert stale.is_dir()


def test_a_failing_build_removes_its_own_folder_and_the_killed_ones(tmp_path, monkeypatch):
    """The build flow's own code (its stages replaced by a failure): the stale folder goes with a log line, and the
    failed build's folder goes too."""
    import flows.build_benchmark as build_flow

    data = tmp_path / "data"
    pid = _killed_build(data, "20261120T100000Z")

    def failing_ingest(parameters, layout):
        assert [p.name for p in layout.benchmarks.glob("*.tmp")] == ["20261120T120000Z.tmp"]  # only its own left
        raise RuntimeError("ingest failed")

    monkeypatch.setattr(build_flow, "ingest", failing_ingest)
    monkeypatch.setattr(build_flow, "new_build_id", lambda benchmarks: "20261120T120000Z")
    with pytest.raises(RuntimeError, match="ingest failed"):
        build_flow.build_benchmark.fn(data_dir=str(data))

    assert not list((data / "benchmarks").glob("*.tmp"))
    line = (f"removed stale {data / 'benchmarks' / '20261120T100000Z.tmp'} from a build that did not finish "
            f"(pid {pid}/started ")
    assert line in (data / "logs" / "20261120T120000Z" / "build.log").read_text()


def test_the_lock_check_follows_the_holder(tmp_path):
    lock = tmp_path / "build.lock"
    assert not holds_build_lock(lock)  # no lock file yet
    with build_lock(lock, "b1"):
        assert holds_build_lock(lock)
    assert not holds_build_lock(lock)
    # a killed holder's record stays in the file, but the lock is free: not held
    subprocess.run([sys.executable, "-c", "import os, json, sys; open(sys.argv[1], 'w').write(json.dumps("
                    "{'pid': os.getppid()}))", str(lock)], check=True)
    assert json.loads(lock.read_text())["pid"] == os.getpid() and not holds_build_lock(lock)
