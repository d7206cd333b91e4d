"""Every `EHRBENCH_*` environment variable, typed, in one place (pydantic-settings).

The Makefile exports them (`make build MIMIC_IV_DIR=…` becomes `EHRBENCH_MIMIC_IV_DIR`), a Prefect worker inherits
them, and command-line options and flow parameters take precedence over them. An empty variable counts as unset:
the Makefile exports `EHRBENCH_MIMIC_IV_DIR=` when no directory was given.

Read with `environment()`, which reads the process environment at the time of the call (tests and the CLI change
it), never at import. `EHRBENCH_WAREHOUSE` is not read but written, for dbt's profiles.yml (ehrbench.transform).
Variables of other tools keep their own names: `OPENAI_API_KEY`, `GEMINI_API_KEY`,
`PHYSIONET_USERNAME`/`PHYSIONET_PASSWORD`, `PREFECT_*`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_DIR = Path(__file__).resolve().parents[2]
_reading_a_mapping: ContextVar[bool] = ContextVar("reading_a_mapping", default=False)


class Environment(BaseSettings):
    """The `EHRBENCH_*` variables; each field's variable is `EHRBENCH_` + its name in capitals."""

    model_config = SettingsConfigDict(env_prefix="EHRBENCH_", env_ignore_empty=True, extra="ignore", frozen=True)

    data_dir: Path = Field(Path("data"), description=(
        "Data directory: raw/, the warehouse, benchmarks/, results/, cache/ (`--data-dir` overrides it)."))
    report_dir: Path = Field(REPO_DIR / "reports" / "site", description=(
        "Where the evaluation dashboard is rendered (`--out` / `report_dir` override it)."))
    mimic_iv_dir: Path | None = Field(None, description="Local MIMIC-IV release (hosp/, icu/); else downloaded.")
    eicu_dir: Path | None = Field(None, description="Local eICU release; else downloaded.")
    mimic_iv_note_dir: Path | None = Field(None, description=(
        "Local MIMIC-IV-Note release (note/discharge.csv.gz, ...): the noteqa suite asks over its discharge "
        "summaries."))
    ehrsql2024_dir: Path | None = Field(None, description=(
        "The published EHRSQL-2024 mimic_iv/ folder: its valid questions get FHIR resource-id ground truth."))
    mimic_iv_url: str | None = Field(None, description="Download location of the MIMIC-IV release (a mirror).")
    eicu_url: str | None = Field(None, description="Download location of the eICU release (a mirror).")
    mimic_iv_note_url: str | None = Field(None, description=(
        "Download location of the MIMIC-IV-Note release (a mirror)."))
    paraphrase_model: str | None = Field(None, description=(
        "Chat model that paraphrases questions (openai:<model>[@<base_url>] or gemini:<model>); else the "
        "templates' hand-written phrasings."))
    note_question_model: str | None = Field(None, description=(
        "Chat model that writes the noteqa questions over the notes (openai:<model>[@<base_url>] or gemini:<model>); "
        "else template questions over the synthetic notes."))
    paraphrase_cache: Path | None = Field(None, description=(
        "SQLite cache of paraphrasing responses; else <data_dir>/cache/llm.sqlite."))
    embedding_model: str | None = Field(None, description=(
        "Embedding model (openai:<model>[@<base_url>]) added to the paraphrase diversity filter."))
    files_url: str | None = Field(None, description=(
        "Base URL of the static server of dashboards and Data Docs (`make server` sets it), so Prefect artifacts "
        "link http:// pages instead of files."))
    cache_dir: Path | None = Field(None, description=(
        "Caches shared by every data directory of this user (dbt's parsed project); else $XDG_CACHE_HOME/ehrbench, "
        "else ~/.cache/ehrbench. Deleting it costs the next build a full dbt parse, nothing else."))
    duckdb_memory_limit: str | None = Field(None, pattern=r"^\d+(\.\d+)?\s*([KMGT]i?B|B)$", description=(
        "DuckDB's memory limit in each process of a build (e.g. 4GB, 2.5GiB); else a sixth of the machine's memory. "
        "Beyond it DuckDB spills to disk."))
    repo_dir: Path | None = Field(None, description=(
        "The checkout a Prefect worker pulls flows from (prefect.yaml's pull step; the Makefile sets it)."))

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings):
        # the process environment only: no .env or secrets files; and none at all while reading a given mapping
        return (init_settings,) if _reading_a_mapping.get() else (init_settings, env_settings)

    def user_cache_dir(self) -> Path:
        """`cache_dir`, else the XDG cache folder's ehrbench/."""
        if self.cache_dir:
            return self.cache_dir
        xdg = os.environ.get("XDG_CACHE_HOME")
        return (Path(xdg) if xdg else Path.home() / ".cache") / "ehrbench"

    def release_url(self, dataset: str) -> str | None:
        """The download location that overrides a dataset's PhysioNet URL, if any."""
        return {"mimic_iv": self.mimic_iv_url, "eicu": self.eicu_url,
                "mimic_iv_note": self.mimic_iv_note_url}.get(dataset)


def environment(environ: Mapping[str, str] | None = None) -> Environment:
    """The `EHRBENCH_*` variables as they are now, or as `environ` gives them (tests, a worker's job variables)."""
    if environ is None:
        return Environment()
    prefix = "EHRBENCH_"
    token = _reading_a_mapping.set(True)
    try:
        return Environment(**{name.removeprefix(prefix).lower(): value for name, value in environ.items()
                              if name.startswith(prefix) and value})
    finally:
        _reading_a_mapping.reset(token)


def variable(field: str) -> str:
    """The environment variable of a field, for messages ("$EHRBENCH_EICU_DIR: … does not exist")."""
    if field not in Environment.model_fields:
        raise KeyError(f"no EHRBENCH_ variable for {field!r}")
    return "EHRBENCH_" + field.upper()
