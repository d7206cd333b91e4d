"""[1/10] ingest: get each raw release (local copy or PhysioNet download), verify it against SHA256SUMS.txt and
load it into the warehouse as raw_<dataset>.<table>.

    per release (MIMIC-IV, eICU; MIMIC-IV-Note when the noteqa suite asks over real notes): download (unless a local
      copy is given) → load (verify, reuse unchanged tables)
      → artifacts `ingest-files` (per file: verification, rows) and `ingest-summary`.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from ehrbench.layout import DataLayout
from ehrbench.settings import BuildParameters
from ehrbench.sources import release_for
from ehrbench.sources.download import download_release
from ehrbench.sources.ingest import IngestedFile, ReleaseIngest, ingest_release
from ehrbench.warehouse import connect
from flows.prefect_api import markdown_artifact, table_artifact


@task(name="download-release", task_run_name="download/{dataset}-{edition}")
def download(dataset: str, edition: str, raw_dir: Path) -> Path:
    release = release_for(dataset, edition)
    logger = get_run_logger()
    logger.info("Downloading %s %s %s from %s into %s", dataset, edition, release.version,
                release.base_url, raw_dir / release.slug)
    last_logged: dict[str, int] = {}

    def progress(path: str, done: int, total: int | None) -> None:
        if done - last_logged.get(path, 0) >= 50 << 20 or done == total:
            last_logged[path] = done
            logger.info("%s: %.1f MB%s", path, done / 1e6, f" of {total / 1e6:.1f} MB" if total else "")

    return download_release(release, raw_dir / release.slug, progress=progress)


@task(name="load-release", task_run_name="load/{dataset}-{edition}")
def load(dataset: str, edition: str, source_dir: Path, origin: str, strict_checksums: bool,
         warehouse: Path) -> list[IngestedFile]:
    logger = get_run_logger()
    release = release_for(dataset, edition)

    def report(file: IngestedFile) -> None:
        if file.status == "unverified":
            logger.warning("%s.%s: %s is UNVERIFIED (%s against SHA256SUMS.txt)", file.dataset, file.table,
                           file.path, file.verification)
        elif file.status == "absent":
            level = logger.error if file.required else logger.warning
            level("%s.%s: optional file absent; created an empty table", file.dataset, file.table)
        logger.info("%s.%s: %s, %d rows (%s)", file.dataset, file.table, file.action, file.rows, file.status)

    with connect(warehouse) as con:
        return ingest_release(con, release, source_dir, origin=origin, strict_checksums=strict_checksums,
                              on_table=report)


@flow(name="ingest")
def ingest(parameters: BuildParameters, layout: DataLayout) -> list[ReleaseIngest]:
    """Returns, per release, where it came from and one record per table."""
    sources = {"mimic_iv": (parameters.mimic_iv_dir, parameters.mimic_iv_edition),
               "eicu": (parameters.eicu_dir, parameters.eicu_edition)}
    if parameters.notes_source == "mimic_iv_note":  # credentialed, no demo: only when asked for
        sources["mimic_iv_note"] = (parameters.mimic_iv_note_dir, "full")
    releases: list[ReleaseIngest] = []
    for dataset, (local_dir, edition) in sources.items():
        if local_dir is not None:
            source_dir, origin = Path(local_dir).expanduser().resolve(), "local"
        else:
            source_dir, origin = download(dataset, edition, layout.raw), "downloaded"
        files = load(dataset, edition, source_dir, origin, parameters.strict_checksums, layout.warehouse)
        release = release_for(dataset, edition)
        releases.append(ReleaseIngest(dataset, edition, release.version, str(source_dir), origin, files))

    every = [f for release in releases for f in release.files]
    table_artifact(
        key="ingest-files",
        table=[{"dataset": f.dataset, "table": f.table, "status": f.status, "check": f.verification,
                "rows": f.rows, "action": f.action, "sha256": (f.sha256 or "")[:16], "path": f.path}
               for f in every],
        description="Raw files: checksum verification against SHA256SUMS.txt and rows loaded.")
    unverified = [f for f in every if f.status == "unverified"]
    absent = [f for f in every if f.status == "absent"]
    unverified_list = ", ".join(f"`{f.dataset}.{f.table}` ({f.verification})" for f in unverified) or "none"
    absent_list = ", ".join(f"`{f.dataset}.{f.table}`" for f in absent) or "none"
    markdown_artifact(
        key="ingest-summary",
        markdown="\n".join([
            "# Ingest",
            *[f"- {r.dataset}: {r.edition} {r.version} from `{r.source_dir}` ({r.origin})" for r in releases],
            f"- tables: {len(every)} ({sum(f.action == 'loaded' for f in every)} loaded, "
            f"{sum(f.action == 'unchanged' for f in every)} unchanged)",
            f"- rows: {sum(f.rows for f in every):,}",
            f"- unverified files: {unverified_list}",
            f"- absent optional tables (empty downstream): {absent_list}",
        ]),
        description="Ingest summary")
    return releases
