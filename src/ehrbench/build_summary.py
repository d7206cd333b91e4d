"""What a build did, in words a person reads: one line per stage (name, seconds, key counts) while it runs, and a
closing summary from its manifest (build id, folder, databases, questions and tasks, checks, warnings, the logs and
what to try next). The same lines serve the terminal, the parent run's logs and its summary artifact."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from ehrbench.manifest import Manifest, StageTiming
from ehrbench.manifest_parts import DatabaseEntry, DqEntry, FhirEntry, MedsEntry, NoteQaEntry, QuestionsEntry
from ehrbench.sources.ingest import ReleaseIngest
from ehrbench.transform import DbtRun
from ehrbench.validation import SuiteResult

STAGES = ("ingest", "transform", "validate", "databases", "fhir", "questions", "dq", "noteqa", "meds", "publish")
NEXT_STEPS = (
    ("uv run ehrbench evaluate --agent oracle --limit 20", "score a baseline on every suite"),
    ("make report", "that run's dashboard (reports/site/)"),
    ("make server", "the Prefect UI; then make deploy for the nightly"),
)


def stage_line(name: str, seconds: float, detail: str) -> str:
    """`[3/10] validate     12.4 s  2 suites, 412 expectations, 0 failed`."""
    position = f"[{STAGES.index(name) + 1}/{len(STAGES)}]" if name in STAGES else "[-]"
    return f"{position} {name:<10} {seconds:6.1f} s  {detail}"


def ingest_detail(releases: Sequence[ReleaseIngest]) -> str:
    files = [f for release in releases for f in release.files]
    present = [f for f in files if f.status != "absent"]
    status = Counter(f.status for f in files)
    reused = sum(f.action == "unchanged" for f in present)
    extra = [f"{status[s]} {s}" for s in ("unverified", "absent") if status[s]]
    return (f"{len(present)} tables of {', '.join(r.dataset for r in releases)}, {sum(f.rows for f in present):,} rows"
            + (f" ({reused} unchanged, reused)" if reused else "") + (f"; {', '.join(extra)}" if extra else ""))


def dbt_detail(runs: Sequence[DbtRun]) -> str:
    counts = Counter()
    for run in runs:
        counts.update(run.outcomes)
    return f"dbt: {sum(counts.values())} nodes ({_counts(counts)})"


def validation_detail(results: Mapping[str, SuiteResult]) -> str:
    evaluated = sum(r.evaluated for r in results.values())
    failed = sum(len(r.failed) for r in results.values())
    skipped = sum(len(r.skipped) for r in results.values())
    return (f"{len(results)} suites, {evaluated} expectations, {failed} failed"
            + (f", {skipped} skipped (absent tables)" if skipped else ""))


def databases_detail(databases: Mapping[str, DatabaseEntry | dict]) -> str:
    entries = [DatabaseEntry.model_validate(info) for info in databases.values()]
    tables = sum(len(entry.row_counts) for entry in entries)
    rows = sum(sum(entry.row_counts.values()) for entry in entries)
    return f"{len(databases)} databases, {tables} tables, {rows:,} rows (DuckDB and SQLite each)"


def fhir_detail(fhir: FhirEntry | Mapping) -> str:
    fhir = FhirEntry.model_validate(fhir)
    counts = fhir.counts
    line = f"{sum(counts.values()):,} resources of {len(counts)} types, {fhir.validated:,} validated"
    for name, view in fhir.views.items():
        line += f"; {name}: {sum(view.counts.values()):,} resources, {view.validated:,} validated"
    if grounding := fhir.ground_truth.get("ehrsql2024_valid"):
        shares = grounding["all"]  # ground_truth.GroundingSummary: mapped (ids found) or empty (gold reads none)
        line += (f"; EHRSQL-2024 valid questions grounded: {shares['mapped'] + shares['empty']:,} of "
                 f"{shares['questions']:,}")
    return line


def questions_detail(questions: QuestionsEntry | Mapping) -> str:
    questions = QuestionsEntry.model_validate(questions)
    suites = ", ".join(f"{n:,} {suite}" for suite, n in sorted(_by_suite(questions).items()))
    return f"{questions.kept:,} kept ({suites}), {questions.quarantined} quarantined"


def dq_detail(dq: DqEntry | Mapping) -> str:
    tasks = DqEntry.model_validate(dq).tasks
    return f"{len(tasks)} audit tasks, {sum(task.clusters for task in tasks):,} errors injected"


def noteqa_detail(noteqa: NoteQaEntry | Mapping) -> str:
    noteqa = NoteQaEntry.model_validate(noteqa)
    levels = ", ".join(f"{n:,} {level}" for level, n in sorted(noteqa.by_level.items()))
    return (f"{noteqa.kept:,} note questions ({levels}) over {noteqa.notes:,} {noteqa.notes_source} notes, "
            f"{noteqa.quarantined} quarantined")


def meds_detail(meds: MedsEntry | Mapping) -> str:
    meds = MedsEntry.model_validate(meds)
    return "; ".join(f"{name}: {t.subjects:,} subjects, {t.events:,} events, {t.codes:,} codes"
                     for name, t in meds.timelines.items()) + f" (MEDS {meds.meds_version}, schemas checked)" + (
        f"; {len(meds.conversion_tasks)} conversion tasks" if meds.conversion_tasks else "") + (
        f", {len(meds.modelling_tasks)} event-modelling tasks" if meds.modelling_tasks else "")


def _by_suite(questions: QuestionsEntry) -> Counter:
    """Questions kept per suite (the manifest counts them per suite and database)."""
    by_suite = Counter()
    for key, n in questions.by_suite.items():
        by_suite[key.split("/")[0]] += n
    return by_suite


def summary_lines(manifest: Manifest, folder: Path, logs: Path | None = None) -> list[str]:
    """The closing summary: what was built, what was checked, what to look at, what to run next."""
    lines = [_headline(manifest)]
    for label, values in _facts(manifest, folder, logs):
        lines += [f"  {label if i == 0 else '':<10} {value}" for i, value in enumerate(values)]
    width = max(len(command) for command, _ in NEXT_STEPS)
    return [*lines, "Next:", *(f"  {command:<{width}}  # {why}" for command, why in NEXT_STEPS)]


def _cpu(timing: StageTiming) -> str:
    return "–" if timing.cpu_seconds is None else f"{timing.cpu_seconds:.1f} s"


def stages_wall_seconds(stages: Mapping[str, StageTiming]) -> float:
    """From the first stage's start to the last one's end: some stages run side by side, so not their sum."""
    if not stages:
        return 0.0
    start = min(stage.started_at for stage in stages.values())
    return max((stage.started_at - start).total_seconds() + stage.seconds for stage in stages.values())


def _headline(manifest: Manifest) -> str:
    seconds = stages_wall_seconds(manifest.stages)
    return f"Build {manifest.build_id} published in {seconds / 60:.1f} min (seed {manifest.seed})"


def _facts(manifest: Manifest, folder: Path, logs: Path | None) -> list[tuple[str, list[str]]]:
    """(label, lines) of the summary, for the terminal and the artifact alike."""
    questions, dq = manifest.questions, manifest.dq
    by_suite = _by_suite(questions)
    dbt_counts = Counter()
    for statuses in manifest.dbt.values():
        for status, n in statuses.items():  # dbt's own statuses: models succeed, tests pass
            dbt_counts["ok" if status in ("success", "pass") else status] += n
    checks = sum(v.get("evaluated", 0) for v in manifest.validation.values())
    failed = sum(len(v.get("failed", [])) for v in manifest.validation.values())
    facts = [
        ("folder", [str(folder)]),
        ("databases", [f"{', '.join(manifest.databases)} (db/: DuckDB and SQLite)"]),
        ("suites", [", ".join(f"{by_suite[s]:,} {s}" for s in ("ehrsql", "fhir", "chatqa") if by_suite[s])
                    + f", {len(dq.tasks)} dq tasks"
                    + (f", {manifest.noteqa.kept:,} noteqa over {manifest.noteqa.notes_source.upper()} notes"
                       if manifest.noteqa.notes_source else "")
                    + (f", {len(manifest.meds.conversion_tasks)} meds_conversion and "
                       f"{len(manifest.meds.modelling_tasks)} event_modelling tasks"
                       if manifest.meds.conversion_tasks or manifest.meds.modelling_tasks else "")
                    + f"; {questions.quarantined + manifest.noteqa.quarantined} questions quarantined"]),
        *([("meds", [", ".join(f"meds/{name}/ ({t.subjects:,} subjects, {t.events:,} events)"
                                for name, t in manifest.meds.timelines.items())])] if manifest.meds.timelines else []),
        ("checks", [f"dbt {sum(dbt_counts.values())} nodes ({_counts(dbt_counts)}); GX {checks - failed}/{checks} "
                    f"expectations met; FHIR {manifest.fhir.validated:,} resources valid"]),
    ]
    warnings = build_warnings(manifest)
    if warnings:
        facts.append(("warnings", warnings))
    if logs is not None:
        facts.append(("logs", [f"{logs} (build.log, dbt.log)"]))
    return facts


def _counts(counter: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {key}" for key, n in sorted(counter.items()))


def build_warnings(manifest: Manifest) -> list[str]:
    """What a careful user should know before trusting the build."""
    warnings = []
    unverified = [f"{f.dataset}.{f.table}" for f in manifest.inputs if f.status == "unverified"]
    if unverified:
        warnings.append(f"{len(unverified)} input files do not match SHA256SUMS.txt (unverified): "
                        + ", ".join(unverified))
    absent = [f"{f.dataset}.{f.table}" for f in manifest.inputs if f.status == "absent"]
    if absent:
        warnings.append(f"{len(absent)} optional input files absent (empty tables): {', '.join(absent)}")
    coverage = manifest.questions.validation.get("coverage", {})
    shortfalls = [name for name, outcome in coverage.items() if not outcome.get("success")]
    if shortfalls:
        warnings.append(f"{len(shortfalls)} question coverage targets not met (see the questions-validation artifact)")
    return warnings


def summary_markdown(manifest: Manifest, folder: Path, links: Mapping[str, str]) -> str:
    """The parent run's artifact: the summary, the stages' times, a link per stage artifact (`links`: title -> URL)
    and the next commands."""
    table = [f"| {label if i == 0 else ''} | {value} |" for label, values in _facts(manifest, folder, None)
             for i, value in enumerate(values)]
    stage_rows = [f"| {name} | {timing.seconds:.1f} s | {_cpu(timing)} |"
                  for name in STAGES if (timing := manifest.stages.get(name)) is not None]
    return "\n".join([f"# {_headline(manifest)}", "", "| | |", "|---|---|", *table, "",
                      "## Stages", "| stage | time | CPU |", "|---|---|---|", *stage_rows, "",
                      "## Artifacts", *[f"- [{title}]({url})" for title, url in links.items()], "",
                      "## Next", *[f"- `{command}`: {why}" for command, why in NEXT_STEPS], ""])
