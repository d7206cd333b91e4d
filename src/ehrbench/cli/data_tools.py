"""Commands over a build's contents that start no flow: the FHIR endpoint, the question templates' check, the
data-quality tasks (list, reference auditor, scorer)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ehrbench.cli.checks import EXIT_FAILED, DataDir, err, fail, refuse
from ehrbench.errors import EhrbenchError
from ehrbench.layout import AuditTaskLayout, BuildLayout, DataLayout
from ehrbench.settings import default_data_dir

fhir_app = typer.Typer(help="The FHIR R4 view of a build.", no_args_is_help=True, rich_markup_mode=None)


@fhir_app.command("serve")
def fhir_serve(
    build: Annotated[str, typer.Option(
        help="'latest', a build id under <data-dir>/benchmarks, or a build folder.")] = "latest",
    view: Annotated[str | None, typer.Option(
        help="The build's FHIR view to serve: mimic_iv_on_fhir (default: the EHRSQL-aligned one).")] = None,
    ndjson: Annotated[Path | None, typer.Option(
        help="Serve this folder of FHIR ndjson instead of a build (e.g. a MIMIC-IV on FHIR download).")] = None,
    handling: Annotated[str, typer.Option(
        help="A search parameter the type lacks, when the request's 'Prefer: handling=' does not say: strict (400) "
             "or lenient (ignored, as Google's FHIR store does; FHIR-AgentBench's client expects it).")] = "strict",
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    data_dir: DataDir = None,
) -> None:
    """Serve a build's FHIR resources (or a folder of ndjson) as a read-only FHIR R4 REST endpoint (JSON)."""
    import tempfile
    import time

    import uvicorn

    from ehrbench.fhir.server import create_app  # FastAPI is imported only for this command

    if handling not in ("strict", "lenient"):
        refuse(f"--handling: expected strict or lenient, got {handling!r}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ehrbench-fhir-serve-") as scratch:
        if ndjson is not None:
            from ehrbench.fhir.ndjson_store import load_ndjson

            database, source = Path(scratch) / "resources.duckdb", ndjson.resolve()
            try:
                counts = load_ndjson(source, database)
            except EhrbenchError as exc:
                fail(str(exc), EXIT_FAILED)
            err.print(f"loaded {sum(counts.values()):,} resources of {len(counts)} types from {source}",
                      highlight=False)
        else:
            layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
            folder = layout.build_folder(build)
            database, source = BuildLayout(folder).fhir_view_resources(view), folder.resolve()
            if not database.is_file():
                what = "no build folder" if not folder.is_dir() else f"a build without the {view or 'FHIR'} view"
                fail(f"{what} at {folder}: expected {database} (list builds with 'ehrbench builds')", EXIT_FAILED)
        fhir = create_app(database.resolve(), handling=handling)
        index = fhir.state.index
        err.print(f"indexed {sum(index.types.values()):,} resources of {source} "
                  f"in {time.perf_counter() - started:.1f}s", highlight=False)
        typer.echo(f"FHIR R4 base URL: http://{host}:{port}/")
        uvicorn.run(fhir, host=host, port=port, log_level="info")


@fhir_app.command("ground")
def fhir_ground(
    ehrsql2024_split: Annotated[Path, typer.Option(
        help="An EHRSQL-2024 split folder (data/mimic_iv/<split>/ with annotated.json and answer.json).")],
    out: Annotated[Path, typer.Option(help="The parquet file to write (one row per question of the split).")],
    view: Annotated[str, typer.Option(help="The FHIR view the ids must exist in.")] = "mimic_iv_on_fhir",
    compare: Annotated[Path | None, typer.Option(
        help="FHIR-AgentBench's published question CSV: print how far our gold agrees with its true_fhir_ids.")] = None,
    build: Annotated[str, typer.Option(
        help="'latest', a build id under <data-dir>/benchmarks, or a build folder.")] = "latest",
    data_dir: DataDir = None,
) -> None:
    """FHIR-AgentBench's ground truth of an EHRSQL-2024 split by its published rules: the questions it keeps, the
    answer of the gold SQL on the raw MIMIC-IV tables (raw calendar years) and the resource ids of the rows it reads,
    checked in the build's mimic_iv_on_fhir view."""
    import tempfile

    from ehrbench.fhir.agentbench_agreement import agreement, summary_lines
    from ehrbench.fhir.agentbench_gold import ground_split_on_warehouse, write_golds
    from ehrbench.metrics.retrieval import ids_by_type
    from ehrbench.tasksets.fhir_agentbench import FHIR_VIEW, FhirAgentBenchFormat

    if view != FHIR_VIEW.database:
        refuse(f"--view: expected {FHIR_VIEW.database} (FHIR-AgentBench's rules need the raw rows and times; the "
               f"EHRSQL-aligned view's ground truth is written by the build itself), got {view!r}")
    if out.suffix != ".parquet":
        refuse(f"--out: expected a .parquet file, got {out}")
    layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
    folder = layout.build_folder(build)
    resources = BuildLayout(folder).fhir_view_resources(view)
    if not resources.is_file():
        fail(f"--build: {folder} has no {view} FHIR view ({resources}); build with it (the default), then ground",
             EXIT_FAILED)
    try:
        published = None
        if compare is not None:
            tasks = FhirAgentBenchFormat().read([compare])
            published = {t.source_id: ids_by_type(zip(t.fhir_types, t.fhir_ids, strict=True)) for t in tasks}
            answers = {t.source_id: t.answer_rows or () for t in tasks}
        with tempfile.TemporaryDirectory(prefix="ehrbench-fhir-ground-") as work:
            golds = ground_split_on_warehouse(ehrsql2024_split, layout.warehouse, resources, Path(work))
        write_golds(golds, out)
    except EhrbenchError as exc:
        fail(str(exc), EXIT_FAILED)
    for line in summary_lines(golds, agreement(golds, published, answers) if published is not None else None):
        typer.echo(line)
    typer.echo(f"-> {out}")


questions_app = typer.Typer(help="Question templates and generated question sets.", no_args_is_help=True,
                            rich_markup_mode=None)


@questions_app.command("check")
def questions_check(
    build: Annotated[str, typer.Option(
        help="'latest', a build id under <data-dir>/benchmarks, or a build folder.")] = "latest",
    database: Annotated[list[str] | None, typer.Option(help="mimic_iv and/or eicu (default both).")] = None,
    template: Annotated[list[str] | None, typer.Option(help="Only templates whose id starts with this.")] = None,
    per_template: Annotated[int, typer.Option(help="Questions to generate per template and database.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the draws.")] = 0,
    templates_dir: Annotated[Path | None, typer.Option(help="Template folder (default: the package's).")] = None,
    show: Annotated[int, typer.Option(help="Example questions to print per template.")] = 1,
    data_dir: DataDir = None,
) -> None:
    """Generate questions from templates on a build's databases and report, per template, how many executed,
    came back empty, failed, or disagree between DuckDB and the exported SQLite. Exits 1 on any failure."""
    from ehrbench.questions.check import check_templates

    layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
    folder = layout.build_folder(build)
    try:
        ok = check_templates(folder, databases=database or None, prefixes=template or None,
                             per_template=per_template, seed=seed, templates_dir=templates_dir, show=show)
    except EhrbenchError as exc:
        fail(str(exc), EXIT_FAILED)
    raise typer.Exit(0 if ok else 1)



dq_app = typer.Typer(help="Data-quality auditing tasks.", no_args_is_help=True, rich_markup_mode=None)


@dq_app.command("score")
def dq_score(
    task_dir: Annotated[Path, typer.Argument(help="A task folder: dq/<task_id>/ of a build (with gold/).")],
    flagged_rows: Annotated[Path, typer.Argument(help="The auditor's flagged_rows.csv (table,_row_id).")],
) -> None:
    """Score flagged rows against a task's hidden labels; prints one JSON object. A bad submission scores as
    empty (exit 0, reason in `submission_problem`); a task folder without labels is an error (exit 1); a submission
    that is not a regular file or over the size limit is refused unopened (exit 2)."""
    import json

    from ehrbench.dq.score import score_task, submission_refusal

    refusal = submission_refusal(flagged_rows)
    if refusal:
        refuse(refusal)
    try:
        result = score_task(task_dir, flagged_rows)
    except EhrbenchError as exc:
        fail(str(exc), EXIT_FAILED)
    typer.echo(json.dumps(result.to_dict()))


@dq_app.command("audit")
def dq_audit(
    task_dir: Annotated[Path, typer.Argument(help="A task folder (its data/ is audited) or a data folder.")],
    out: Annotated[Path, typer.Option(help="Where to write the flagged rows (table,_row_id).")] = Path(
        "flagged_rows.csv"),
) -> None:
    """Run the rule-based reference auditor (plausible bands, units, near-duplicates, lab/chart disagreement,
    temporal order, references) and write its flagged_rows.csv: a baseline submission for `dq score`."""
    from collections import Counter

    from ehrbench.dq.auditor import audit, flagged_rows, write_flagged_rows

    data = AuditTaskLayout(task_dir).data
    data = data if data.is_dir() else task_dir
    if not any(data.glob("*.csv*")):
        fail(f"{data}: no tables (*.csv.gz); expected a task folder with data/", EXIT_FAILED)
    findings = audit(data)
    write_flagged_rows(findings, out)
    by_check = ", ".join(f"{check} {n}" for check, n in sorted(Counter(f.check for f in findings).items()))
    typer.echo(f"{len(flagged_rows(findings))} rows flagged ({by_check or 'nothing found'}) -> {out}")


@dq_app.command("tasks")
def dq_tasks(
    build: Annotated[str, typer.Option(help="'latest', a build id, or a build folder.")] = "latest",
    data_dir: DataDir = None,
) -> None:
    """List the data-quality tasks of a build: task id, errors injected, families, folder (one line each)."""
    import json

    layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
    folder = layout.build_folder(build)
    tasks = BuildLayout(folder).dq_tasks()
    if not tasks:
        err.print(f"no data-quality tasks in {folder.resolve()} (dq/<task_id>/instruction.md)")
        return
    for task in tasks:
        meta = task.task_json
        about = json.loads(meta.read_text()) if meta.is_file() else {}
        typer.echo(f"{task.task_id}\t{about.get('clusters', '?')}\t{','.join(about.get('families', []))}\t"
                   f"{task.root.resolve()}")


