"""Named parameter sets of the compatibility profiles, as dbt `--vars` dicts.

The `ehrsql_eicu` dbt profile (dbt_project/models/ehrsql_eicu/) reads one var dict
`ehrsql_eicu = {current_time, start_year, time_span, seed}`:
- `start_year`, `time_span`: each patient's first hospital discharge year is shifted to a year drawn
  from start_year … start_year + time_span (inclusive; weights 1, 2, …, time_span + 1, so later
  years are likelier); the patient's later years keep their distance from the first one.
- `current_time`: "now"; stays admitted later are dropped, later event times dropped/NULL.
- `seed`: numpy default_rng(seed) for the first years, the stratified dates and the cost draws.

The renamed eICU database (`renamed/eicu`, EHR-ChatQA's eICU database, docs/benchmarks.md#ehr-chatqa-eicu-database)
reads the same var group, so its times agree with the `ehrsql_eicu` database's and the chatqa tasks' current time,
but always applies EHR-ChatQA's preprocessing (models/renamed/eicu/intermediate/); the presets choose the time shift
only. With the default preset it is EHR-ChatQA's published eICU database.

dbt replaces (does not merge) a project var given with --vars, so these helpers always return
the complete dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ehrbench.errors import ConfigError
from ehrbench.layout import BuildLayout
from ehrbench.renaming import SchemaRename, draw_random_rename, published_rename

EICU_PRESETS: dict[str, dict[str, Any]] = {
    # EHR-ChatQA's time shift (the dbt project default): with it, renamed/eicu is EHR-ChatQA's eICU database. Every
    # patient, not de-identified.
    "ehrchatqa": {"current_time": "2100-12-31 23:59:00", "start_year": 2100, "time_span": 0, "seed": 0,
                  "num_patients": None, "current_ratio": 0.0, "deidentify": False},
    # EHRSQL (2022) eICU, as its README runs preprocess_db.py: years 2100–2105, now = end of 2105, 1,000 patients of
    # whom 10 % current (--num_patient default, --cur_patient_ratio 0.1), --deid. The sample and the
    # de-identification apply to ehrsql_eicu only.
    "ehrsql2022": {"current_time": "2105-12-31 23:59:00", "start_year": 2100, "time_span": 5, "seed": 0,
                   "num_patients": 1000, "current_ratio": 0.1, "deidentify": True},
}


def eicu_vars(preset: str = "ehrchatqa", **overrides: Any) -> dict[str, dict[str, Any]]:
    """The `--vars` dict for the ehrsql_eicu profile: a named preset with keyword overrides.

    >>> eicu_vars("ehrsql2022", seed=3)["ehrsql_eicu"]["seed"]
    3
    """
    if preset not in EICU_PRESETS:
        raise ConfigError(f"unknown eICU preset {preset!r}; choose one of {', '.join(sorted(EICU_PRESETS))}")
    params = dict(EICU_PRESETS[preset])
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise ConfigError(f"unknown ehrsql_eicu parameter(s) {', '.join(unknown)}; "
                         f"expected {', '.join(params)}")
    params.update(overrides)
    _check(params)
    return {"ehrsql_eicu": params}


def _check(params: dict[str, Any]) -> None:
    from datetime import datetime

    for key in ("start_year", "time_span", "seed"):
        if not isinstance(params[key], int) or isinstance(params[key], bool):
            raise ConfigError(f"ehrsql_eicu {key} must be an integer, got {params[key]!r}")
    if params["time_span"] < 0 or params["seed"] < 0:
        raise ConfigError("ehrsql_eicu time_span and seed must be >= 0")
    num_patients = params["num_patients"]
    if num_patients is not None and (not isinstance(num_patients, int) or isinstance(num_patients, bool)
                                     or num_patients < 1):
        raise ConfigError(f"ehrsql_eicu num_patients must be a positive integer or None (every patient), "
                         f"got {num_patients!r}")
    ratio = params["current_ratio"]
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
        raise ConfigError(f"ehrsql_eicu current_ratio must be a number in [0, 1], got {ratio!r}")
    if not isinstance(params["deidentify"], bool):
        raise ConfigError(f"ehrsql_eicu deidentify must be true or false, got {params['deidentify']!r}")
    try:
        now = datetime.strptime(params["current_time"], "%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        raise ConfigError(f"ehrsql_eicu current_time must read 'YYYY-MM-DD HH:MM:SS', "
                         f"got {params['current_time']!r}") from None
    if now.year < params["start_year"]:
        raise ConfigError(f"ehrsql_eicu current_time {params['current_time']} lies before start_year "
                         f"{params['start_year']}")


# --- the benchmark databases built by dbt and exported into every build --------------------------

EHRSQL2024_DEFAULTS: dict[str, Any] = {"current_time": "2100-12-31 23:59:00", "start_year": 2100, "time_span": 0,
                                       "seed": 0, "num_patients": 100, "current_ratio": 0.1}


@dataclass(frozen=True)
class BenchmarkDatabase:
    """One exported database: dbt folder `models/<profile>/<database>/`, warehouse schema
    `<profile>__<database>`, files `db/<profile>/<database>.duckdb|.sqlite` in the build."""

    profile: str
    database: str

    @property
    def sqlite_numeric(self) -> bool:
        """Whether the SQLite file gives numeric columns NUMERIC affinity, as EHR-ChatQA's eICU database does
        (a whole-number lab result is stored as 11, not 11.0; docs/benchmarks.md#ehr-chatqa-eicu-database)."""
        return self.database == "eicu" and self.profile in ("renamed", "renamed_random")

    @property
    def sqlite_text_columns(self) -> tuple[tuple[str, str], ...]:
        """(table, column) in compatibility-schema names that the SQLite file stores as text although they hold
        numbers, as EHR-ChatQA's eICU database stores `age`; the DuckDB file keeps them numeric, since DuckDB does
        not compare text with numbers."""
        return (("patient", "age"),) if self.sqlite_numeric else ()

    @property
    def key(self) -> str:
        return f"{self.profile}/{self.database}"

    @property
    def schema(self) -> str:
        return f"{self.profile}__{self.database}"

    def files(self, build_dir: Path) -> tuple[Path, Path]:
        return BuildLayout(build_dir).database_files(self.profile, self.database)


BENCHMARK_DATABASES: tuple[BenchmarkDatabase, ...] = (
    BenchmarkDatabase("ehrsql2024", "mimic_iv"),
    BenchmarkDatabase("ehrsql_eicu", "eicu"),
    BenchmarkDatabase("renamed", "mimic_iv"),
    BenchmarkDatabase("renamed", "eicu"),
    BenchmarkDatabase("renamed_random", "mimic_iv"),
    BenchmarkDatabase("renamed_random", "eicu"),
)

# What `dbt build --select` needs for every profile: the rename seed, the profile folders, the hidden lineage.
PROFILE_SELECTION: tuple[str, ...] = ("ehrchatqa_rename_map", *dict.fromkeys(db.profile for db in BENCHMARK_DATABASES),
                                      "lineage")

# Hidden lineage (benchmark row -> raw row and source key) per `<profile>/<database>`, as warehouse relations.
# renamed_random shares renamed's rows and row ids.
LINEAGE_MODELS: dict[str, str] = {
    "ehrsql2024/mimic_iv": "lineage.ehrsql2024__mimic_iv",
    "ehrsql_eicu/eicu": "lineage.ehrsql_eicu__eicu",
    "renamed/mimic_iv": "lineage.renamed__mimic_iv",
    "renamed/eicu": "lineage.renamed__eicu",
    "renamed_random/mimic_iv": "lineage.renamed__mimic_iv",
    "renamed_random/eicu": "lineage.renamed__eicu",
}


def random_renames(seed: int) -> dict[str, SchemaRename]:
    """Per database, the synonyms drawn with `seed` for the renamed profile's names (profile renamed_random)."""
    return {database: draw_random_rename(published_rename(database), seed) for database in ("mimic_iv", "eicu")}


def schema_renames(seed: int) -> dict[str, SchemaRename]:
    """Per renamed `<profile>/<database>`, the map from the compatibility schema (ehrsql2024 / ehrsql_eicu table
    and column names) to the profile's names: the published EHR-ChatQA renames, then for renamed_random the
    synonyms drawn with `seed` on top of them."""
    maps: dict[str, SchemaRename] = {}
    for database, drawn in random_renames(seed).items():
        published = published_rename(database)
        maps[f"renamed/{database}"] = published
        maps[f"renamed_random/{database}"] = published.then(drawn)
    return maps


def profile_vars(seed: int, eicu_preset: str = "ehrchatqa", **time_overrides: Any) -> dict[str, dict[str, Any]]:
    """dbt `--vars` for every profile. The build seed drives every draw (0 reproduces the published
    databases) including renamed_random's names; `time_overrides` (current_time, start_year, time_span) apply
    to all profiles. Typed: `ProfileVars.for_build`."""
    overrides = {k: v for k, v in time_overrides.items() if v is not None}
    unknown = sorted(set(overrides) - {"current_time", "start_year", "time_span"})
    if unknown:
        raise ConfigError(f"unknown time parameter(s) {', '.join(unknown)}")
    mimic = {**EHRSQL2024_DEFAULTS, **overrides, "seed": seed}
    drawn = {database: rename.dbt_var() for database, rename in random_renames(seed).items()}
    return {"ehrsql2024": mimic, **eicu_vars(eicu_preset, seed=seed, **overrides), "renamed_random": drawn}


VarGroup = Literal["ehrsql2024", "ehrsql_eicu"]


class TimeShift(BaseModel):
    """The var group of a time-shifted profile (`ehrsql_eicu`, and the base of `ehrsql2024`'s): see the module
    docstring."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    current_time: str  # YYYY-MM-DD HH:MM:SS
    start_year: int
    time_span: int
    seed: int


class Ehrsql2024Vars(TimeShift):
    """The `ehrsql2024` profile's var group: its time shift, and the patient sample of EHRSQL-2024's preprocessing."""

    num_patients: int
    current_ratio: float


class EicuVars(TimeShift):
    """The `ehrsql_eicu` var group: the eICU time shift, and EHRSQL (2022)'s patient sample (num_patients None: every
    patient) and de-identification, which only the ehrsql_eicu database applies."""

    num_patients: int | None
    current_ratio: float
    deidentify: bool


class DqVars(BaseModel):
    """The `dq` models' var group: the audit extract's seeded patient sample."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    patients: int


class ProfileVars(BaseModel):
    """The dbt `--vars` of every profile of a build, typed (`profile_vars` gives the same as a dict). The field
    order is the dict's, so `to_dbt_vars()` yields exactly what dbt and the manifest have always been given.

    A build gives every dbt command the same vars (`dq` included): dbt re-parses the whole project (~12 s) whenever
    its vars differ from the previous command's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ehrsql2024: Ehrsql2024Vars
    ehrsql_eicu: EicuVars
    renamed_random: dict[str, dict[str, Any]]  # per database, the drawn names (SchemaRename.dbt_var())
    dq: DqVars | None = None

    @classmethod
    def for_build(cls, seed: int, eicu_preset: str = "ehrchatqa", **time_overrides: Any) -> ProfileVars:
        """The vars of a build: see `profile_vars`."""
        return cls.model_validate(profile_vars(seed, eicu_preset, **time_overrides))

    def time_shift(self, group: VarGroup) -> TimeShift:
        """The time parameters of a var group (the one a database reads its current time from)."""
        return {"ehrsql2024": self.ehrsql2024, "ehrsql_eicu": self.ehrsql_eicu}[group]

    def with_dq(self, seed: int, patients: int) -> ProfileVars:
        """These vars with the `dq` group of an audit extract of `patients` patients drawn with `seed`."""
        return self.model_copy(update={"dq": DqVars(seed=seed, patients=patients)})

    def to_dbt_vars(self) -> dict[str, dict[str, Any]]:
        """The plain dict dbt takes as `--vars` (and the manifest records as `profile_vars`)."""
        return self.model_dump(exclude={"dq"} if self.dq is None else None)
