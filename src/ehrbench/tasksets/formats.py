"""The importer interface: one `TaskFormat` per published task-file format (a module each, registered in
`ehrbench.tasksets.registry`), and what a format may ask of the build it is imported against (`BuildInfo`).

A format says how to read its files (`read(paths) -> [ImportedTask]`), where its tasks run (`target`: a database
profile of the build, or the FHIR view), which agent suite runs them and which published protocol scores them, what
it needs of the build (`requires`, `check_build`), and how its benchmark's scorer prepares and compares an answer
(`prepare_sql`, `answer_form`, `agrees`) — the last three only for formats whose tasks carry gold SQL."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.layout import BuildLayout
from ehrbench.tasksets.model import BuildRef, ImportedTask, Target


@dataclass(frozen=True)
class BuildInfo:
    """A published build as a task set sees it: its id, parameters and databases (its manifest read as JSON, so a
    task set reads builds of any manifest version)."""

    folder: Path
    manifest: dict

    @classmethod
    def load(cls, folder: Path) -> BuildInfo:
        path = BuildLayout(folder).manifest
        if not path.is_file():
            raise MissingInputError(f"{folder}: no published build (manifest.json); run 'ehrbench build' first")
        try:
            manifest = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc.msg}); expected a build manifest") from None
        return cls(folder.resolve(), manifest)

    @property
    def build_id(self) -> str:
        return str(self.manifest.get("build_id") or self.folder.name)

    @property
    def eicu_preset(self) -> str | None:
        return (self.manifest.get("parameters") or {}).get("eicu_preset")

    def edition(self, dataset: str) -> str | None:
        return ((self.manifest.get("sources") or {}).get(dataset) or {}).get("edition")

    def current_time(self, profile: str) -> str | None:
        return ((self.manifest.get("profile_vars") or {}).get(profile) or {}).get("current_time")

    def database(self, target: Target) -> Path:
        """The target's SQLite file: the published benchmarks' scorers run SQLite, so task sets do too."""
        return BuildLayout(self.folder).database_files(target.profile, target.database)[1]

    def ref(self) -> BuildRef:
        return BuildRef(build_id=self.build_id, folder=str(self.folder), eicu_preset=self.eicu_preset,
                        editions={d: e for d in ("mimic_iv", "eicu") if (e := self.edition(d))})


class TaskFormat(ABC):
    """A published task-file format."""

    name: ClassVar[str]  # as `--format` takes it
    protocol: ClassVar[str]  # ehrbench.tasks.Gold.protocol of its tasks
    suite: ClassVar[str]  # the agent suite that runs its tasks (ehrbench.tasks.SUITES)
    profile: ClassVar[str]  # the database profile its tasks run on
    summary: ClassVar[str]  # one line for --help and `tasks list`
    needs_notes: ClassVar[bool] = False  # its questions are asked over notes given with --notes (read_notes)

    @abstractmethod
    def read(self, paths: Sequence[Path]) -> list[ImportedTask]:
        """The tasks of the published files, in file order. Raises ConfigError naming the file and the task."""

    def default_name(self, paths: Sequence[Path]) -> str:
        return f"{self.name}-{Path(paths[0]).resolve().stem}"

    def read_notes(self, tasks: Sequence[ImportedTask], notes: Path) -> tuple[Path, list[ImportedTask], list]:
        """The notes file read under `notes`, the tasks linked to their notes, the notes (formats with
        `needs_notes`)."""
        raise ConfigError(f"--notes: format {self.name} asks over no notes")

    def target(self, task: ImportedTask) -> Target:
        return Target(self.profile, task.db)

    def requires(self) -> dict[str, str]:
        """Build parameters the tasks need (recorded in the task set's manifest)."""
        return {}

    def check_build(self, build: BuildInfo) -> list[str]:
        """Warnings about running the tasks on `build`; raises ConfigError when they cannot run on it."""
        return []

    def fhir_resources(self, build: BuildInfo) -> Path | None:
        """The FHIR view whose resources hold the tasks' gold ids (None: the format has no FHIR ids)."""
        return None

    def not_compared(self, build: BuildInfo) -> str | None:
        """Why published answers are recomputed on `build` instead of compared with it (None: they are compared)."""
        return None

    def current_time(self, build: BuildInfo, target: Target) -> str | None:
        return build.current_time(target.profile)

    def prepare_sql(self, sql: str, current_time: str | None) -> str:
        """The SQL as the benchmark's scorer executes it (placeholders filled in)."""
        return sql

    def answer_form(self, rows: list[list]) -> str:
        """Rows as the protocol compares them (shown in mismatches)."""
        return json.dumps(rows, default=str)

    def agrees(self, rows: list[list], published: str) -> bool:
        """The executed rows are the published answer under the protocol's comparison."""
        return self.answer_form(rows) == published


def one_folder(paths: Sequence[Path], what: str) -> Path:
    if len(paths) != 1:
        raise ConfigError(f"{', '.join(map(str, paths)) or 'no path'}: expected one path, {what}")
    folder = Path(paths[0])
    if not folder.is_dir():
        raise ConfigError(f"{folder}: {'not a folder' if folder.exists() else 'not found'}; expected {what}")
    return folder
