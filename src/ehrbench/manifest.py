"""The build manifest: everything needed to reproduce and audit a published build."""

from __future__ import annotations

import importlib.metadata
from datetime import datetime

from pydantic import BaseModel, Field

from ehrbench.settings import BuildParameters

# Packages whose versions change what a build contains.
RECORDED_PACKAGES = ("ehrbench", "prefect", "dbt-core", "dbt-duckdb", "duckdb", "great-expectations",
                     "pyarrow", "pydantic", "numpy")


class InputFile(BaseModel):
    dataset: str
    table: str
    path: str
    required: bool
    status: str  # verified | unverified | absent
    verification: str  # verified | mismatch | unlisted | absent
    sha256: str | None
    expected_sha256: str | None
    rows: int
    action: str  # loaded | unchanged | absent


class StageTiming(BaseModel):
    started_at: datetime
    seconds: float


class Manifest(BaseModel):
    build_id: str
    created_at: datetime
    finished_at: datetime | None = None
    parameters: BuildParameters
    seed: int
    sources: dict[str, dict[str, str]] = Field(description="dataset -> edition, version, dir, origin")
    packages: dict[str, str]
    inputs: list[InputFile]
    raw_row_counts: dict[str, int]
    built_row_counts: dict[str, int]
    dbt: dict[str, dict[str, int]] = Field(default_factory=dict, description="dbt command -> status counts")
    validation: dict[str, dict] = Field(default_factory=dict, description="suite -> GX summary")
    stages: dict[str, StageTiming] = Field(default_factory=dict)

    @property
    def unverified_inputs(self) -> list[InputFile]:
        return [f for f in self.inputs if f.status == "unverified"]


def package_versions() -> dict[str, str]:
    versions = {}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions
