"""What each PhysioNet release looks like: where it lives, which files it has, their columns.

The table layouts are package data (`data/tables.csv`, `data/<dataset>_columns.csv`), transcribed from
the official Postgres DDL (MIT-LCP mimic-code for MIMIC-IV 2.2 and MIMIC-IV-Note 2.2, eicu-code for eICU 2.0) and
checked against the demo files' headers. MIMIC-IV-Note has no demo: it is a credentialed release only, an optional
source of a build's note QA.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from ehrbench.environment import environment
from ehrbench.errors import ConfigError

Dataset = Literal["mimic_iv", "eicu", "mimic_iv_note"]
Edition = Literal["demo", "full"]
DATASETS: tuple[Dataset, ...] = ("mimic_iv", "eicu", "mimic_iv_note")

CHECKSUM_FILE = "SHA256SUMS.txt"


@dataclass(frozen=True)
class TableSpec:
    dataset: Dataset
    name: str
    path: str  # relative to the release root, as written in SHA256SUMS.txt
    required: bool
    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type) in file-header order

    @property
    def qualified_name(self) -> str:
        return f"{raw_schema(self.dataset)}.{self.name}"


@dataclass(frozen=True)
class Release:
    dataset: Dataset
    edition: Edition
    version: str
    base_url: str
    credentialed: bool

    @property
    def slug(self) -> str:
        """Folder name under data/raw/, e.g. `mimic-iv-demo-2.2`."""
        return f"{self.dataset.replace('_', '-')}-{self.edition}-{self.version}"

    @property
    def tables(self) -> tuple[TableSpec, ...]:
        return table_specs(self.dataset)

    def table(self, name: str) -> TableSpec:
        for spec in self.tables:
            if spec.name == name:
                return spec
        raise KeyError(f"{self.dataset} has no table {name!r}")


_PHYSIONET = "https://physionet.org/files/"
_RELEASES: dict[tuple[Dataset, Edition], Release] = {
    ("mimic_iv", "demo"): Release("mimic_iv", "demo", "2.2", _PHYSIONET + "mimic-iv-demo/2.2/", False),
    ("mimic_iv", "full"): Release("mimic_iv", "full", "2.2", _PHYSIONET + "mimiciv/2.2/", True),
    ("eicu", "demo"): Release("eicu", "demo", "2.0.1", _PHYSIONET + "eicu-crd-demo/2.0.1/", False),
    ("eicu", "full"): Release("eicu", "full", "2.0", _PHYSIONET + "eicu-crd/2.0/", True),
    ("mimic_iv_note", "full"): Release("mimic_iv_note", "full", "2.2", _PHYSIONET + "mimic-iv-note/2.2/", True),
}


def release_for(dataset: Dataset, edition: Edition = "demo") -> Release:
    """The release; `EHRBENCH_<DATASET>_URL` overrides its download location (mirrors, tests)."""
    try:
        release = _RELEASES[(dataset, edition)]
    except KeyError:
        editions = sorted(e for d, e in _RELEASES if d == dataset)
        raise ConfigError(f"unknown release {dataset}/{edition}; expected dataset in {DATASETS}, "
                          f"edition in {editions or ['demo', 'full']}") from None
    override = environment().release_url(dataset)
    if override:
        release = Release(dataset, edition, release.version, override.rstrip("/") + "/", release.credentialed)
    return release


def raw_schema(dataset: Dataset) -> str:
    return f"raw_{dataset}"


@cache
def table_specs(dataset: Dataset) -> tuple[TableSpec, ...]:
    data = resources.files("ehrbench.sources") / "data"
    columns: dict[str, list[tuple[str, str]]] = {}
    with (data / f"{dataset}_columns.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            columns.setdefault(row["table"], []).append((row["column"], row["type"]))
    specs = []
    with (data / "tables.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            if row["dataset"] == dataset:
                specs.append(TableSpec(dataset, row["table"], row["path"], row["required"] == "true",
                                       tuple(columns[row["table"]])))
    return tuple(specs)
