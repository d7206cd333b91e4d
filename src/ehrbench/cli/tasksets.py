"""`ehrbench tasks`: published benchmarks' task files as task sets of the data directory (ehrbench.tasksets) —
import one (checked against a build: its gold SQL executed, its published answers compared), list them, and score
another harness's prediction file with the protocol's scorer; and a build's workspace tasks exported for Harbor, its
job results read back (ehrbench.workspace.harbor). Refused input is one line and exit code 2, before
anything is written; a failure while importing (a gold SQL that fails) one line and exit code 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ehrbench.cli.checks import EXIT_FAILED, DataDir, check_build, check_run_id, data_root, err, fail, refuse
from ehrbench.errors import ConfigError, EhrbenchError
from ehrbench.layout import DataLayout

tasks_app = typer.Typer(help="Published benchmarks' task files imported as task sets (evaluate with --taskset); "
                        "workspace tasks exported for Harbor and its jobs scored.",
                        no_args_is_help=True, rich_markup_mode=None)

MISMATCH_CHARS = 160  # of each answer in a printed mismatch; the manifest keeps them whole


def _format_help() -> str:
    from ehrbench.tasksets.registry import FORMATS

    return "Format of the files: " + "; ".join(f"{name}: {fmt.summary}" for name, fmt in FORMATS.items()) + "."


@tasks_app.command("import")
def import_(
    paths: Annotated[list[Path], typer.Argument(help="The published file(s), or the split folder (ehrsql2024).",
                                                metavar="PATH")],
    format_name: Annotated[str, typer.Option("--format", help=_format_help())],
    name: Annotated[str | None, typer.Option(help="Task set name. Default: <format>-<file or folder name>.")] = None,
    build: Annotated[str, typer.Option(help="'latest', a build id, or a build folder: the build whose databases "
                                            "the gold SQL runs on and the task set is evaluated on.")] = "latest",
    replace: Annotated[bool, typer.Option("--replace", help="Replace a task set of the same name.")] = False,
    notes: Annotated[Path | None, typer.Option(
        help="ehrnoteqa: MIMIC-IV-Note 2.2's folder (note/discharge.csv.gz), whose discharge summaries the "
             "questions are asked over; they are copied into the task set.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Import a published task file as a task set (data/tasksets/<name>/): execute every gold SQL on the build's
    target database, compare with the published answers, print the share reproduced and every mismatch."""
    from ehrbench.tasksets.importer import plan_import, run_import

    data = DataLayout(root=data_root(data_dir))
    try:
        plan = plan_import(data, format_name, paths, name, build, replace, notes)
    except EhrbenchError as exc:
        refuse(str(exc))
    for warning in plan.warnings:
        err.print(f"warning: {warning}", soft_wrap=True)
    where = f"{', '.join(map(str, plan.targets))} of build {plan.build.build_id}"
    err.print(f"importing {len(plan.tasks):,} {plan.fmt.name} tasks as {plan.layout.name!r}: "
              + (f"gold SQL on {where}" if plan.executed_on else f"published gold, to run on {where}"), soft_wrap=True)
    try:
        manifest = run_import(plan)
    except EhrbenchError as exc:
        fail(str(exc), EXIT_FAILED)
    report = manifest.reproduction
    for mismatch in report.mismatches:
        err.print(f"  mismatch {mismatch.task_id}: published {_cut(mismatch.published)}, "
                  f"reproduced {_cut(mismatch.reproduced)}", soft_wrap=True)
    typer.echo(f"task set {manifest.name}: {manifest.tasks:,} tasks ({manifest.answerable:,} answerable), suite "
               f"{manifest.suite}, protocol {manifest.protocol}, build {manifest.build.build_id}")
    typer.echo(f"  {report.describe()}")
    if coverage := report.describe_fhir_ids():
        typer.echo(f"  {coverage}")
    if plan.notes:
        typer.echo(f"  {len(plan.notes):,} discharge summaries of {len({n.subject_id for n in plan.notes}):,} "
                   f"patients copied in ({plan.layout.notes.name}); each question is a multichoice and an openended "
                   f"task")
    typer.echo(f"  folder {plan.layout.root}")
    typer.echo(f"next: uv run ehrbench evaluate --taskset {manifest.name} --agent oracle --agent abstain"
               + ("" if manifest.build.build_id == _latest(data) else f" --build {manifest.build.build_id}"))


@tasks_app.command("list")
def list_(data_dir: DataDir = None) -> None:
    """The task sets of the data directory: format, protocol, suite, tasks, answers reproduced, build."""
    from rich.console import Console
    from rich.table import Table

    from ehrbench.tasksets.store import list_tasksets

    data = DataLayout(root=data_root(data_dir))
    found = list_tasksets(data)
    if not found:
        err.print(f"no task sets in {data.tasksets}; import one with 'ehrbench tasks import'")
        return
    table = Table("task set", "format", "protocol", "suite", "tasks", "answerable", "reproduced", "build",
                  "imported (UTC)")
    for layout, manifest in found:
        if isinstance(manifest, str):
            table.add_row(layout.name, "?", "", "", "", "", manifest, "", "")
            continue
        report = manifest.reproduction
        reproduced = (f"{report.reproduced}/{report.compared}" if report.compared
                      else f"recomputed ({report.executed})")
        table.add_row(manifest.name, manifest.format, manifest.protocol, manifest.suite, f"{manifest.tasks:,}",
                      f"{manifest.answerable:,}", reproduced, manifest.build.build_id,
                      manifest.created_at.strftime("%Y-%m-%d %H:%M:%S"))
    Console(width=200 if not sys.stdout.isatty() else None, markup=False, emoji=False).print(table)


@tasks_app.command("score")
def score(
    predictions: Annotated[Path, typer.Argument(help="Predictions in the benchmark's own format (EHRSQL-2024, "
                                                     "EHRSQL: a JSON object of question id -> SQL or \"null\").")],
    taskset: Annotated[str, typer.Option(help="The task set the predictions answer.")],
    data_dir: DataDir = None,
) -> None:
    """Score another harness's predictions on a task set with the scorer of its protocol, on the build it was
    imported against; prints the published metrics as one JSON object."""
    from ehrbench.settings import TASKSET_NAME_FORM
    from ehrbench.tasksets.model import is_name
    from ehrbench.tasksets.predictions import read_predictions, score_predictions

    if not is_name(taskset):
        refuse(f"--taskset: expected {TASKSET_NAME_FORM}, got {taskset!r}")
    data = DataLayout(root=data_root(data_dir))
    try:
        loaded = read_predictions(data.taskset(taskset), predictions)
    except EhrbenchError as exc:
        refuse(str(exc))
    try:
        result = score_predictions(loaded)
    except ConfigError as exc:  # predictions the scorer refuses (e.g. EHRSQL-2024's: not every question id)
        refuse(str(exc))
    except EhrbenchError as exc:  # no scorer for the protocol, the build's database gone
        fail(str(exc), EXIT_FAILED)
    typer.echo(json.dumps(result))


@tasks_app.command("export")
def export(
    out: Annotated[Path, typer.Argument(help="A new (or empty) folder for the exported tasks.")],
    format_name: Annotated[str, typer.Option("--format", help="Task format: harbor (Harbor's task folders).")],
    build: Annotated[str, typer.Option(help="'latest', a build id, or a build folder.")] = "latest",
    family: Annotated[list[str] | None, typer.Option(
        help="Only these workspace-task families (repeatable): dq, meds_conversion, event_modelling.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Export a build's workspace tasks (data-quality audits, MEDS conversion, event modelling) for another harness:
    `--format harbor` writes one Harbor task per task (task.toml, instruction, environment, hidden tests and
    solution), for terminal agents run by Harbor; read its job back with `ehrbench tasks score-harbor`."""
    from ehrbench.tasks import WORKSPACE_SUITES
    from ehrbench.workspace.harbor import export_harbor

    if format_name != "harbor":
        refuse(f"--format: expected harbor, got {format_name!r}")
    families = ("dq", *WORKSPACE_SUITES)
    unknown = sorted(set(family or []) - set(families))
    if unknown:
        refuse(f"--family: unknown {', '.join(unknown)}; expected some of {', '.join(families)}")
    data = DataLayout(root=data_root(data_dir))
    check_build(data, build)
    try:
        folder = data.build_folder(build)
        exported = export_harbor(folder, out, tuple(family) if family else None)
    except EhrbenchError as exc:
        refuse(str(exc))
    for task in exported:
        typer.echo(f"{task.folder}\t{task.harbor_name}")
    err.print(f"{len(exported)} Harbor task(s) of build {folder.resolve().name} in {out}; run them with e.g. "
              f"'harbor run -p {out} -a <agent> -m <model>', then 'ehrbench tasks score-harbor jobs/<job>'",
              soft_wrap=True)


@tasks_app.command("score-harbor")
def score_harbor(
    job: Annotated[Path, typer.Argument(help="A Harbor job folder (jobs/<job name>/) run on exported tasks.")],
    run_id: Annotated[str | None, typer.Option(help="The results run to write. Default: harbor-<job name>.")] = None,
    build: Annotated[str | None, typer.Option(
        help="The build the tasks were exported from, when the export's record is not beside them.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Read a Harbor job's trials (rewards from ehrbench's verifier, agent, tokens, errors) into ehrbench's parquet
    results, a run of its own: then `ehrbench metrics` and `ehrbench report` show it beside ehrbench's agents."""
    from ehrbench.evaluation.results import ResultStore
    from ehrbench.workspace.harbor import read_harbor_job

    run = run_id or f"harbor-{job.resolve().name}"
    check_run_id(run)
    data = DataLayout(root=data_root(data_dir))
    store = ResultStore(data.results, run)
    if store.parts():
        refuse(f"--run-id: run {run!r} already has results in {store.folder}; choose another run id")
    if build is not None:
        check_build(data, build)
    try:
        rows = read_harbor_job(job, build and data.build_folder(build).resolve().name)
    except EhrbenchError as exc:
        refuse(str(exc))
    store.write(rows)
    passed = sum(1 for r in rows if r["correct"])
    typer.echo(f"{len(rows)} Harbor trial(s) of {len({r['agent'] for r in rows})} agent(s), {passed} passed, "
               f"{sum(r['status'] == 'error' for r in rows)} without a reward: {store.folder}")
    typer.echo(f"next: uv run ehrbench metrics --run-id {run}; uv run ehrbench report --run-id {run}")


def check_tasksets(data: DataLayout, build: str, names: list[str]) -> None:
    """`evaluate --taskset`: each task set exists and was imported against the build evaluated (refused otherwise,
    before Prefect starts). Called after the build is checked."""
    from ehrbench.tasksets.formats import BuildInfo
    from ehrbench.tasksets.store import read_manifest

    if not names:
        return
    build_id = BuildInfo.load(data.build_folder(build)).build_id
    for name in names:
        try:
            manifest = read_manifest(data.taskset(name))
        except EhrbenchError as exc:
            refuse(f"--taskset: {exc}")
        if manifest.build.build_id != build_id:
            refuse(f"--taskset: task set {name!r} was imported against build {manifest.build.build_id}, not "
                   f"{build_id} (its gold answers are that build's); evaluate it with --build "
                   f"{manifest.build.build_id}, or import it again with --build {build_id} and another --name")


def _cut(text: str) -> str:
    return text if len(text) <= MISMATCH_CHARS else text[:MISMATCH_CHARS] + "…"


def _latest(data: DataLayout) -> str | None:
    from ehrbench.publish import latest_build_id

    return latest_build_id(data.benchmarks)
