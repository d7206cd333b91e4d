"""`ehrbench` command line: build benchmarks and list published builds."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ehrbench.errors import EhrbenchError
from ehrbench.publish import latest_build_id, published_builds
from ehrbench.settings import DataLayout, DqSettings, QuestionSettings, default_data_dir

app = typer.Typer(help="Reproducible benchmarks for LLM agents over EHR databases.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
_err = Console(stderr=True)

DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", help="Data directory (raw/, warehouse, benchmarks/). Default: $EHRBENCH_DATA_DIR or ./data")]


@app.command()
def build(
    mimic_iv_dir: Annotated[Path | None, typer.Option(
        help="Local MIMIC-IV release (hosp/, icu/). Default: $EHRBENCH_MIMIC_IV_DIR, else download.")] = None,
    eicu_dir: Annotated[Path | None, typer.Option(
        help="Local eICU release. Default: $EHRBENCH_EICU_DIR, else download.")] = None,
    strict_checksums: Annotated[bool, typer.Option(
        "--strict-checksums", help="Fail on local files that do not match SHA256SUMS.txt.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for every random choice of the build.")] = 0,
    mimic_iv_edition: Annotated[str, typer.Option(help="Release to download: demo or full.")] = "demo",
    eicu_edition: Annotated[str, typer.Option(help="Release to download: demo or full.")] = "demo",
    current_time: Annotated[str | None, typer.Option(
        help="'Now' of the time-shifted databases (YYYY-MM-DD HH:MM:SS). Default 2100-12-31 23:59:00.")] = None,
    start_year: Annotated[int | None, typer.Option(help="First year of the shifted range. Default 2100.")] = None,
    time_span: Annotated[int | None, typer.Option(help="Years first visits spread over. Default 0.")] = None,
    eicu_preset: Annotated[str, typer.Option(
        help="eICU time constants: ehrchatqa (2100, span 0) or ehrsql2022 (2100-2105).")] = "ehrchatqa",
    ehrsql2024_dir: Annotated[Path | None, typer.Option(
        help="Published EHRSQL-2024 mimic_iv/ folder: its valid questions get FHIR resource-id ground truth. "
             "Default: $EHRBENCH_EHRSQL2024_DIR, else none.")] = None,
    questions_per_template: Annotated[int, typer.Option(help="Questions per template and database.")] = 5,
    paraphrase_model: Annotated[str | None, typer.Option(
        help="Chat model that paraphrases the questions: openai:<model>[@<base_url>] or gemini:<model>. Default: "
             "$EHRBENCH_PARAPHRASE_MODEL, else the templates' own phrasings.")] = None,
    dq_recipes: Annotated[Path | None, typer.Option(
        help="Recipe file (YAML) of the data-quality audit tasks. Default: the suite's own recipes.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Run the build-benchmark flow (same parameters as the Prefect deployment)."""
    root = (data_dir or default_data_dir()).resolve()
    # Without a configured Prefect API, flows run against a temporary local server whose database
    # belongs under the data directory, not the user's home.
    os.environ.setdefault("PREFECT_HOME", str(root / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    if dq_recipes:  # a broken recipe file fails before any stage runs
        from ehrbench.dq.recipes import load_recipes

        try:
            load_recipes(dq_recipes)
        except (FileNotFoundError, ValueError) as exc:
            _err.print(f"[bold red]ehrbench: error:[/] {exc}", soft_wrap=True, highlight=False)
            raise typer.Exit(2) from None
    from flows.build_benchmark import build_benchmark  # Prefect is imported only for this command

    try:
        _check_prefect_api()
        folder = build_benchmark(
            mimic_iv_dir=str(mimic_iv_dir) if mimic_iv_dir else None,
            eicu_dir=str(eicu_dir) if eicu_dir else None,
            strict_checksums=strict_checksums, seed=seed, mimic_iv_edition=mimic_iv_edition,
            eicu_edition=eicu_edition, current_time=current_time, start_year=start_year, time_span=time_span,
            eicu_preset=eicu_preset, ehrsql2024_dir=str(ehrsql2024_dir) if ehrsql2024_dir else None,
            questions=QuestionSettings(per_template=questions_per_template, paraphrase_model=paraphrase_model),
            dq=DqSettings(recipes=dq_recipes.resolve() if dq_recipes else None), data_dir=str(root))
    except EhrbenchError as exc:
        _err.print(f"[bold red]ehrbench: error:[/] {exc}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    except ValueError as exc:  # parameter validation (pydantic) before any stage ran
        _err.print(f"[bold red]ehrbench: error:[/] {str(exc).splitlines()[0]}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    typer.echo(folder)


def _check_prefect_api() -> None:
    """A configured but dead Prefect API (say, `make server` not stopped before a reboot) fails fast."""
    import httpx
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        return  # ephemeral mode: Prefect starts a temporary server
    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=5).raise_for_status()
    except httpx.HTTPError as exc:
        raise EhrbenchError(f"the Prefect API at {url} does not answer ({type(exc).__name__}); start it with "
                            "'make server', or run 'make stop' to go back to a temporary server") from None


@app.command()
def builds(data_dir: DataDir = None) -> None:
    """List published builds with their manifest summary (latest marked with *)."""
    layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
    manifests = published_builds(layout.benchmarks)
    if not manifests:
        _err.print(f"no published builds in {layout.benchmarks}")
        return
    latest = latest_build_id(layout.benchmarks)
    table = Table("build", "created (UTC)", "seed", "sources", "inputs", "unverified", "raw rows",
                  "built tables", "checks", "seconds")
    for m in manifests:
        checks = sum(v.get("evaluated", 0) for v in m.validation.values())
        failed = sum(len(v.get("failed", [])) for v in m.validation.values())
        table.add_row(
            ("* " if m.build_id == latest else "  ") + m.build_id,
            m.created_at.strftime("%Y-%m-%d %H:%M:%S"), str(m.seed),
            ", ".join(f"{d} {s.get('edition', '')} {s.get('version', '')}" for d, s in m.sources.items()),
            str(len(m.inputs)), str(len(m.unverified_inputs)), f"{sum(m.raw_row_counts.values()):,}",
            str(len(m.built_row_counts)), f"{checks - failed}/{checks}",
            f"{sum(s.seconds for s in m.stages.values()):.1f}")
    Console(width=200 if not sys.stdout.isatty() else None).print(table)


fhir_app = typer.Typer(help="The FHIR R4 view of a build.", no_args_is_help=True)
app.add_typer(fhir_app, name="fhir")


@fhir_app.command("serve")
def fhir_serve(
    build: Annotated[str, typer.Option(
        help="'latest', a build id under <data-dir>/benchmarks, or a build folder.")] = "latest",
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    data_dir: DataDir = None,
) -> None:
    """Serve a build's FHIR resources as a read-only FHIR R4 REST endpoint (JSON)."""
    import time

    import uvicorn

    from ehrbench.fhir.server import create_app  # FastAPI is imported only for this command

    layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
    folder = layout.build_folder(build)
    database = folder / "fhir" / "resources.duckdb"
    if not database.is_file():
        what = "no build folder" if not folder.is_dir() else "a build without FHIR resources"
        _err.print(f"[bold red]ehrbench: error:[/] {what} at {folder}: expected {database} (written by builds "
                   "with the FHIR view; list builds with 'ehrbench builds')", soft_wrap=True, highlight=False)
        raise typer.Exit(1)
    started = time.perf_counter()
    fhir = create_app(database.resolve())
    index = fhir.state.index
    _err.print(f"indexed {sum(index.types.values()):,} resources of {folder.resolve()} "
               f"in {time.perf_counter() - started:.1f}s", highlight=False)
    typer.echo(f"FHIR R4 base URL: http://{host}:{port}/")
    uvicorn.run(fhir, host=host, port=port, log_level="info")


questions_app = typer.Typer(help="Question templates and generated question sets.", no_args_is_help=True)
app.add_typer(questions_app, name="questions")


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
        _err.print(f"[bold red]ehrbench: error:[/] {exc}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    raise typer.Exit(0 if ok else 1)


@app.command()
def evaluate(
    agent: Annotated[list[str], typer.Option(
        help="Agent to evaluate (repeatable): oracle, abstain, llm:<model>@<base_url>, llm:openai:<model>, "
             "llm:gemini:<model>.")] = None,
    agent_option: Annotated[list[str], typer.Option(
        help="key=value option of every llm agent (repeatable), e.g. ehrsql_mode=single_turn, fhir_variant=search, "
             "max_actions=30, user_model=openai:gpt-4o-mini, api_key_env=MY_KEY.")] = None,
    judge_model: Annotated[str | None, typer.Option(
        help="Model spec of the LLM judge of free-text (FHIR) answers; default: normalised match.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Trials in flight per model endpoint.")] = 4,
    dask_address: Annotated[str | None, typer.Option(
        help="Run the trials on this Dask scheduler (tcp://host:port) instead of local threads.")] = None,
    suite: Annotated[list[str], typer.Option(
        help="Suite (repeatable): ehrsql, chatqa, fhir, dq. Default: all.")] = None,
    trials: Annotated[int, typer.Option(min=1, help="Trials per task (k).")] = 1,
    limit: Annotated[int | None, typer.Option(min=1, help="Tasks per suite (a seeded sample).")] = None,
    run_id: Annotated[str | None, typer.Option(
        help="Run id; an existing one is resumed. Default: a timestamp.")] = None,
    build: Annotated[str, typer.Option(help="'latest', a build id, or a build folder.")] = "latest",
    seed: Annotated[int, typer.Option(help="Seed of the task sample.")] = 0,
    report: Annotated[bool, typer.Option(help="Render the run's dashboard (reports/site/) at the end.")] = True,
    data_dir: DataDir = None,
) -> None:
    """Run the evaluate-agents flow; prints the run's results folder (then see `ehrbench metrics`)."""
    root = (data_dir or default_data_dir()).resolve()
    os.environ.setdefault("PREFECT_HOME", str(root / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    from ehrbench.agents.config import parse_options
    from flows.evaluate import evaluate_agents

    try:
        _check_prefect_api()
        chosen = {"suites": suite, "agents": agent}
        agent_options = parse_options(agent_option or [])
        folder = evaluate_agents(build=build, trials=trials, limit=limit, run_id=run_id, seed=seed, data_dir=str(root),
                                 agent_options=agent_options, judge_model=judge_model,
                                 concurrency_per_endpoint=concurrency, dask_address=dask_address, report=report,
                                 **{name: values for name, values in chosen.items() if values})
    except (EhrbenchError, FileNotFoundError, ValueError) as exc:
        _err.print(f"[bold red]ehrbench: error:[/] {str(exc).splitlines()[0]}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    typer.echo(folder)


@app.command()
def metrics(
    run_id: Annotated[str, typer.Option(help="The evaluation run.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line instead of a table.")] = False,
    data_dir: DataDir = None,
) -> None:
    """The metric table of an evaluation run, per agent and suite (DESIGN §5.6)."""
    import json

    from ehrbench.evaluation.report import metric_table
    from ehrbench.evaluation.results import ResultStore

    layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
    try:
        rows = metric_table(ResultStore(layout.results, run_id).folder)
    except (FileNotFoundError, ValueError) as exc:
        _err.print(f"[bold red]ehrbench: error:[/] {exc}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return
    from rich.table import Table

    columns = list(dict.fromkeys(key for row in rows for key in row))
    table = Table(*columns)
    for row in rows:
        table.add_row(*("" if row.get(c) is None else f"{row[c]:.4g}" if isinstance(row.get(c), float)
                        else str(row[c]) for c in columns))
    Console(width=max(120, 14 * len(columns))).print(table)


@app.command()
def report(
    run_id: Annotated[str | None, typer.Option(help="The evaluation run. Default: the newest run.")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Site folder (replaced whole). Default: reports/site/ or EHRBENCH_REPORT_DIR.")] = None,
    trend_prefix: Annotated[str | None, typer.Option(
        help="Runs whose id is <prefix><UTC time> form the trend. Default: this run id without its time.")] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap replicates of the intervals (0: none).")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    data_dir: DataDir = None,
) -> None:
    """Render a run's dashboard (leaderboards, breakdowns, curves, trends, transcripts, build) as a static site
    and publish it as Prefect artifacts; prints the path of index.html."""
    root = (data_dir or default_data_dir()).resolve()
    os.environ.setdefault("PREFECT_HOME", str(root / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    from ehrbench.evaluation.results import run_parts
    from ehrbench.reports.assemble import newest_run
    from flows.report import render_report

    try:
        results = DataLayout(root=root).results
        run_id = run_id or newest_run(results)
        run_parts(results / f"run_id={run_id}")  # a missing run is named before any Prefect start-up
        _check_prefect_api()
        index = render_report(run_id=run_id, trend_prefix=trend_prefix, bootstrap_replicates=bootstrap,
                              bootstrap_seed=seed, report_dir=str(out.resolve()) if out else None, data_dir=str(root))
    except (EhrbenchError, FileNotFoundError, ValueError) as exc:
        _err.print(f"[bold red]ehrbench: error:[/] {str(exc).splitlines()[0]}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    typer.echo(index)


dq_app = typer.Typer(help="Data-quality auditing tasks.", no_args_is_help=True)
app.add_typer(dq_app, name="dq")


@dq_app.command("score")
def dq_score(
    task_dir: Annotated[Path, typer.Argument(help="A task folder: dq/<task_id>/ of a build (with gold/).")],
    flagged_rows: Annotated[Path, typer.Argument(help="The auditor's flagged_rows.csv (table,_row_id).")],
) -> None:
    """Score flagged rows against a task's hidden labels; prints one JSON object. A bad submission scores as
    empty (exit 0, reason in `submission_problem`); a task folder without labels is an error (exit 1)."""
    import json

    from ehrbench.dq.score import score_task

    try:
        result = score_task(task_dir, flagged_rows)
    except (FileNotFoundError, ValueError) as exc:
        _err.print(f"[bold red]ehrbench: error:[/] {exc}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
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

    data = task_dir / "data" if (task_dir / "data").is_dir() else task_dir
    if not any(data.glob("*.csv*")):
        _err.print(f"[bold red]ehrbench: error:[/] {data}: no tables (*.csv.gz); expected a task folder with data/",
                   soft_wrap=True, highlight=False)
        raise typer.Exit(1)
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
    tasks = sorted(p.parent for p in (folder / "dq").glob("*/instruction.md"))
    if not tasks:
        _err.print(f"no data-quality tasks in {folder.resolve()} (dq/<task_id>/instruction.md)")
        return
    for task in tasks:
        meta = task / "gold" / "task.json"
        about = json.loads(meta.read_text()) if meta.is_file() else {}
        typer.echo(f"{task.name}\t{about.get('clusters', '?')}\t{','.join(about.get('families', []))}\t"
                   f"{task.resolve()}")


def main() -> None:  # pragma: no cover - console entry point
    app()
