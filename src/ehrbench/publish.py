"""Build folders: written as `<build_id>.tmp/`, published by an atomic rename, then `latest` switched.

A published folder is never modified again; a failed build removes its `.tmp` folder and leaves
`latest` pointing where it did. A killed build cannot: its `.tmp` folder (hundreds of MB) is removed by the next
build, which holds the build lock — so no build that is still running owns any other `.tmp` folder.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ehrbench.errors import PublishError
from ehrbench.layout import BuildLayout
from ehrbench.manifest import Manifest

_TMP = ".tmp"


def new_build_id(benchmarks: Path, now: datetime | None = None) -> str:
    """A sortable UTC timestamp, with a counter if that second is taken."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    build_id, n = stamp, 1
    while (benchmarks / build_id).exists() or (benchmarks / f"{build_id}{_TMP}").exists():
        n += 1
        build_id = f"{stamp}-{n}"
    return build_id


def staging_dir(benchmarks: Path, build_id: str) -> Path:
    path = benchmarks / f"{build_id}{_TMP}"
    path.mkdir(parents=True, exist_ok=False)
    owner = {"build_id": build_id, "pid": os.getpid(), "started_at": datetime.now(UTC).isoformat(timespec="seconds")}
    BuildLayout(path).owner.write_text(json.dumps(owner))
    return path


@dataclass(frozen=True)
class UnfinishedBuild:
    """The staging folder of a build that ended without removing it (killed), and who wrote it."""

    folder: Path
    pid: int | None
    started_at: str

    def removed_line(self) -> str:
        return (f"removed stale {self.folder} from a build that did not finish "
                f"(pid {self.pid if self.pid is not None else 'unknown'}/started {self.started_at})")


def remove_unfinished_builds(benchmarks: Path, lock_path: Path) -> list[UnfinishedBuild]:
    """Remove the `.tmp` folders killed builds left behind. Only the holder of the build lock may: a build stages its
    folder while holding that lock and removes it (discard or publish) before letting go, so while this process
    holds it no other `.tmp` folder belongs to a running build. Anything else raises."""
    from ehrbench.warehouse import holds_build_lock  # not at the top: `ehrbench builds` need not import DuckDB

    if not holds_build_lock(lock_path):
        raise RuntimeError(f"{lock_path}: removing unfinished builds needs the build lock held by this process")
    if not benchmarks.is_dir():
        return []
    removed = []
    for folder in sorted(benchmarks.glob(f"*{_TMP}")):
        if folder.is_symlink() or not folder.is_dir():  # never follow a link out of the data folder
            continue
        unfinished = _unfinished(folder)
        shutil.rmtree(folder)
        removed.append(unfinished)
    return removed


def _unfinished(folder: Path) -> UnfinishedBuild:
    """Who wrote a staging folder; without its owner file (an older build), the build id says when it started."""
    try:
        owner = json.loads(BuildLayout(folder).owner.read_text())
        return UnfinishedBuild(folder, int(owner["pid"]), str(owner["started_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return UnfinishedBuild(folder, None, build_id_of(folder))


def build_id_of(folder: Path) -> str:
    """The id of a build folder, published or still being written (`<build_id>.tmp`)."""
    return folder.name.removesuffix(_TMP)


def discard(benchmarks: Path, build_id: str) -> None:
    shutil.rmtree(benchmarks / f"{build_id}{_TMP}", ignore_errors=True)


def publish(benchmarks: Path, manifest: Manifest) -> Path:
    """Write the manifest into the staging folder, rename it into place and point `latest` at it."""
    tmp = benchmarks / f"{manifest.build_id}{_TMP}"
    final = benchmarks / manifest.build_id
    if not tmp.is_dir():
        raise PublishError(f"{tmp}: staging folder of build {manifest.build_id} is missing")
    if final.exists():
        raise PublishError(f"{final} exists already; published builds are never overwritten")
    BuildLayout(tmp).owner.unlink(missing_ok=True)  # a published build is nobody's work in progress
    _write_durably(BuildLayout(tmp).manifest, manifest.model_dump_json(indent=2))
    os.rename(tmp, final)
    link_tmp = benchmarks / f".latest-{manifest.build_id}"
    link_tmp.unlink(missing_ok=True)
    link_tmp.symlink_to(manifest.build_id)  # relative: the data folder can move
    os.replace(link_tmp, benchmarks / "latest")
    return final


def published_builds(benchmarks: Path) -> list[Manifest]:
    """Every published build, oldest first (unreadable manifests are skipped, not fatal)."""
    if not benchmarks.is_dir():
        return []
    builds = []
    for folder in sorted(benchmarks.iterdir()):
        if folder.is_symlink() or folder.name.endswith(_TMP) or not BuildLayout(folder).manifest.is_file():
            continue
        try:
            builds.append(Manifest.model_validate_json(BuildLayout(folder).manifest.read_text()))
        except ValueError:
            continue
    return sorted(builds, key=lambda m: m.created_at)


def latest_build_id(benchmarks: Path) -> str | None:
    link = benchmarks / "latest"
    return os.readlink(link) if link.is_symlink() else None


def _write_durably(path: Path, text: str) -> None:
    with path.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())

