"""`ehrbench` command line: build benchmarks, evaluate agents, render reports, and list what was built.

The commands that run a Prefect flow (build, evaluate, report) check their input first (`checks`), before Prefect is
imported or a temporary Prefect server is started: a bad option is one line on stderr and exit code 2, a failure
while the flow runs one line and exit code 1 (`prefect_runs`). Commands over a build's contents: `data_tools`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ehrbench.build_summary import stages_wall_seconds
from ehrbench.cli.checks import (
    EXIT_FAILED,
    DataDir,
    build_parameters,
    check_build,
    check_model_spec,
    check_run_id,
    check_sandbox,
    checked,
    data_root,
    err,
    fail,
    refuse,
)
from ehrbench.cli.data_tools import dq_app, fhir_app, questions_app
from ehrbench.cli.prefect_runs import flow_failures, following_flows, prefect_api, use_prefect
from ehrbench.cli.tasksets import check_tasksets, tasks_app
from ehrbench.layout import DataLayout
from ehrbench.publish import latest_build_id, published_builds
from ehrbench.settings import EvaluationParameters, ReportParameters, default_data_dir

Verbose = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Print every log line of the Prefect runs instead of a line per stage.")]

# rich_markup_mode=None: help text is printed as written. Rich markup would turn `llm:gemini:<model>` into an emoji.
app = typer.Typer(help="Reproducible benchmarks for LLM agents over EHR databases.", no_args_is_help=True,
                  pretty_exceptions_enable=False, rich_markup_mode=None)
app.add_typer(fhir_app, name="fhir")
app.add_typer(questions_app, name="questions")
app.add_typer(dq_app, name="dq")
app.add_typer(tasks_app, name="tasks")


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
        help="eICU settings: ehrchatqa (2100, span 0, every patient) or ehrsql2022 (2100-2105, 1,000 patients, "
             "de-identified).")] = "ehrchatqa",
    ehrsql2024_dir: Annotated[Path | None, typer.Option(
        help="Published EHRSQL-2024 mimic_iv/ folder: its valid questions get FHIR resource-id ground truth. "
             "Default: $EHRBENCH_EHRSQL2024_DIR, else none.")] = None,
    mimic_iv_on_fhir: Annotated[bool, typer.Option(
        "--mimic-iv-on-fhir/--no-mimic-iv-on-fhir",
        help="Also build the mimic_iv_on_fhir FHIR view (MIMIC-IV on FHIR's resources of every raw row: "
             "FHIR-AgentBench's data; large from the full MIMIC-IV).")] = True,
    questions_per_template: Annotated[int, typer.Option(help="Questions per template and database.")] = 5,
    paraphrase_model: Annotated[str | None, typer.Option(
        help="Chat model that paraphrases the questions: openai:<model>[@<base_url>] or gemini:<model>. Default: "
             "$EHRBENCH_PARAPHRASE_MODEL, else the templates' own phrasings.")] = None,
    note_question_model: Annotated[str | None, typer.Option(
        help="Chat model that writes the noteqa questions over the notes (and rejects those it answers without "
             "them). Default: $EHRBENCH_NOTE_QUESTION_MODEL, else template questions.")] = None,
    mimic_iv_note_dir: Annotated[Path | None, typer.Option(
        help="Local MIMIC-IV-Note 2.2 release (note/discharge.csv.gz, ...): noteqa asks over its discharge "
             "summaries (needs a note-question model). Default: $EHRBENCH_MIMIC_IV_NOTE_DIR, else synthetic "
             "notes.")] = None,
    notes: Annotated[str | None, typer.Option(
        help="Notes noteqa asks over: synthetic, or mimic_iv_note (downloaded with PhysioNet credentials unless "
             "--mimic-iv-note-dir is given). Default: mimic_iv_note with a MIMIC-IV-Note directory, else "
             "synthetic.")] = None,
    note_patients: Annotated[int, typer.Option(
        help="Most patients noteqa asks about, one question each (a seeded sample beyond).")] = 1000,
    dq_recipes: Annotated[Path | None, typer.Option(
        help="Recipe file (YAML) of the data-quality audit tasks. Default: the suite's own recipes.")] = None,
    verbose: Verbose = False,
    data_dir: DataDir = None,
) -> None:
    """Run the build-benchmark flow (same parameters as the Prefect deployment)."""
    root = data_root(data_dir)
    parameters = build_parameters(dict(
        mimic_iv_dir=mimic_iv_dir, eicu_dir=eicu_dir, strict_checksums=strict_checksums, seed=seed,
        mimic_iv_edition=mimic_iv_edition, eicu_edition=eicu_edition, current_time=current_time,
        start_year=start_year, time_span=time_span, eicu_preset=eicu_preset, ehrsql2024_dir=ehrsql2024_dir,
        mimic_iv_on_fhir=mimic_iv_on_fhir, mimic_iv_note_dir=mimic_iv_note_dir, notes=notes,
        questions={"per_template": questions_per_template, "paraphrase_model": paraphrase_model,
                   "note_question_model": note_question_model, "note_patients": note_patients},
        dq={"recipes": dq_recipes.resolve() if dq_recipes else None}))
    use_prefect(root, verbose=verbose)
    with flow_failures(), following_flows(verbose), prefect_api() as api_ready:
        from flows.build_benchmark import build_benchmark  # Prefect is imported only for this command; meanwhile
        from flows.warm_up import import_in_background

        import_in_background()  # the first stages' slow imports, on the core that the starting server leaves idle
        api_ready()  # the temporary server (if there is no configured one) has been starting
        folder = build_benchmark(
            mimic_iv_dir=str(mimic_iv_dir) if mimic_iv_dir else None,
            eicu_dir=str(eicu_dir) if eicu_dir else None,
            strict_checksums=strict_checksums, seed=seed, mimic_iv_edition=mimic_iv_edition,
            eicu_edition=eicu_edition, current_time=current_time, start_year=start_year, time_span=time_span,
            eicu_preset=eicu_preset, ehrsql2024_dir=str(ehrsql2024_dir) if ehrsql2024_dir else None,
            mimic_iv_on_fhir=mimic_iv_on_fhir, mimic_iv_note_dir=str(mimic_iv_note_dir) if mimic_iv_note_dir else None,
            notes=notes, questions=parameters.questions, dq=parameters.dq, data_dir=str(root))
    _result(folder)



@app.command()
def builds(data_dir: DataDir = None) -> None:
    """List published builds with their manifest summary (latest marked with *)."""
    layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
    manifests = published_builds(layout.benchmarks)
    if not manifests:
        err.print(f"no published builds in {layout.benchmarks}")
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
            f"{stages_wall_seconds(m.stages):.1f}")
    Console(width=200 if not sys.stdout.isatty() else None, markup=False, emoji=False).print(table)



@app.command()
def evaluate(
    agent: Annotated[list[str], typer.Option(
        help="Agent to evaluate (repeatable): oracle, abstain, llm:<model>@<base_url>, llm:openai:<model>, "
             "llm:gemini:<model>.")] = None,
    agent_option: Annotated[list[str], typer.Option(
        help="key=value option of every llm agent (repeatable), e.g. ehrsql_mode=single_turn, fhir_variant=search, "
             "max_actions=30, user_model=openai:gpt-4o-mini, api_key_env=MY_KEY.")] = None,
    judge_model: Annotated[str | None, typer.Option(
        help="Model spec of the LLM judge of free-text answers (fhir; noteqa: EHRNoteQA's judge prompt, published "
             "gpt-4-1106-preview); default: normalised match, for noteqa the letter or the option's text.")] = None,
    judge_votes: Annotated[int, typer.Option(
        help="Times the noteqa judge is asked per answer, the majority deciding (1-15; EHRNoteQA: 1).")] = 1,
    concurrency: Annotated[int, typer.Option(help="Trials in flight per model endpoint (1-64).")] = 4,
    dask_address: Annotated[str | None, typer.Option(
        help="Run the trials on this Dask scheduler (tcp://host:port) instead of local threads.")] = None,
    suite: Annotated[list[str], typer.Option(
        help="Suite (repeatable): ehrsql, chatqa, fhir, dq, noteqa. Default: all, or none when --taskset is "
             "given.")] = None,
    taskset: Annotated[list[str], typer.Option(
        help="Imported task set (repeatable; see `ehrbench tasks list`), evaluated like a suite.")] = None,
    trials: Annotated[int, typer.Option(help="Trials per task (k, 1-100).")] = 1,
    limit: Annotated[int | None, typer.Option(help="Tasks per suite and per task set (a seeded sample).")] = None,
    run_id: Annotated[str | None, typer.Option(
        help="Run id; an existing one is resumed. Default: a timestamp.")] = None,
    build: Annotated[str, typer.Option(help="'latest', a build id, or a build folder.")] = "latest",
    seed: Annotated[int, typer.Option(help="Seed of the task sample.")] = 0,
    report: Annotated[bool, typer.Option(help="Render the run's dashboard (reports/site/) at the end.")] = True,
    unsafe_sandbox: Annotated[bool, typer.Option(
        "--unsafe-sandbox", help="Where bubblewrap cannot isolate LLM agents' SQL and Python, run them with only "
                                 "the in-process checks (every result row records it). Never for untrusted models.")
    ] = False,
    verbose: Verbose = False,
    data_dir: DataDir = None,
) -> None:
    """Run the evaluate-agents flow; prints the run's results folder (then see `ehrbench metrics`)."""
    from ehrbench.agents.config import BASELINES, parse_agents, parse_options
    from ehrbench.tasks import SUITES

    root = data_root(data_dir)
    try:
        agent_options = parse_options(agent_option or [])
    except ValueError as exc:
        refuse(f"--agent-option: {exc}")
    try:
        parse_agents(agent or list(BASELINES), agent_options)
    except ValueError as exc:
        refuse(f"--agent: {exc}")
    if judge_model:
        check_model_spec(judge_model, "--judge-model")
    for name in suite or []:
        if name not in SUITES:
            refuse(f"--suite: unknown suite {name!r}; expected some of {', '.join(SUITES)}")
    if run_id is not None:
        check_run_id(run_id)  # an existing run is resumed
    checked(EvaluationParameters, {"suites": suite or None, "tasksets": taskset or [],
                                   "agents": agent or list(BASELINES), "trials": trials, "limit": limit, "seed": seed,
                                   "run_id": run_id, "concurrency_per_endpoint": concurrency,
                                   "judge_votes": judge_votes})
    check_build(DataLayout(root=root), build)
    check_tasksets(DataLayout(root=root), build, taskset or [])
    check_sandbox(agent or list(BASELINES), agent_options, unsafe_sandbox)
    use_prefect(root, verbose=verbose)
    with flow_failures(), following_flows(verbose), prefect_api() as api_ready:
        from flows.evaluate import evaluate_agents

        api_ready()
        chosen = {"suites": suite, "agents": agent, "tasksets": taskset}
        folder = evaluate_agents(build=build, trials=trials, limit=limit, run_id=run_id, seed=seed, data_dir=str(root),
                                 agent_options=agent_options, judge_model=judge_model, judge_votes=judge_votes,
                                 concurrency_per_endpoint=concurrency, dask_address=dask_address, report=report,
                                 unsafe_sandbox=unsafe_sandbox,
                                 **{name: values for name, values in chosen.items() if values})
    _result(folder)


@app.command()
def follow(
    run: Annotated[str | None, typer.Argument(
        help="A flow run: its id or name (as `prefect deployment run` prints them).")] = None,
    deployment: Annotated[str | None, typer.Option(
        help="Else the newest run of this deployment, e.g. evaluate-agents/nightly.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Follow a run on the Prefect server of `make server`: its own progress lines (a line per stage, trials every
    30 s, the summary and next steps) until it ends; exit 0 when it completed. Unlike `prefect deployment run
    --watch`, which also lists every task run's state changes (thousands for a nightly evaluation)."""
    if (run is None) == (deployment is None):
        refuse("give a flow run (its id or name) or --deployment <flow>/<deployment>, one of them")
    use_prefect(data_root(data_dir))
    from prefect.settings import get_current_settings

    from ehrbench.cli.follow import follow_run

    if not get_current_settings().api.url:
        fail("no Prefect server is configured: start one with 'make server' (runs of the temporary servers of CLI "
             "commands end with them)", EXIT_FAILED)
    with flow_failures(), prefect_api():
        state = follow_run(run, deployment, lambda line: err.print(line, soft_wrap=True))
    raise typer.Exit(0 if state == "COMPLETED" else EXIT_FAILED)


@app.command()
def metrics(
    run_id: Annotated[str, typer.Option(help="The evaluation run.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line instead of a table.")] = False,
    data_dir: DataDir = None,
) -> None:
    """The metric table of an evaluation run, per agent and suite, and per task set (docs/benchmarks.md#metrics)."""
    import json

    from ehrbench.errors import EhrbenchError
    from ehrbench.evaluation.results import ResultStore
    from ehrbench.evaluation.taskset_metrics import metric_table_by_taskset

    check_run_id(run_id)
    layout = DataLayout(root=(data_dir or default_data_dir()).resolve())
    try:
        rows = metric_table_by_taskset(ResultStore(layout.results, run_id).folder)
    except EhrbenchError as exc:  # no such run, or a part that is no parquet file, named
        fail(str(exc), EXIT_FAILED)
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
    Console(width=max(120, 14 * len(columns)), markup=False, emoji=False).print(table)


@app.command()
def report(
    run_id: Annotated[str | None, typer.Option(help="The evaluation run. Default: the newest run.")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Site folder (replaced whole). Default: reports/site/ or EHRBENCH_REPORT_DIR.")] = None,
    trend_prefix: Annotated[str | None, typer.Option(
        help="Runs whose id is <prefix><UTC time> form the trend. Default: this run id without its time.")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap replicates of the intervals (0: none).")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    verbose: Verbose = False,
    data_dir: DataDir = None,
) -> None:
    """Render a run's dashboard (leaderboards, breakdowns, curves, trends, transcripts, build) as a static site
    and publish it as Prefect artifacts; prints where to open it (index.html as a file:// URL, http:// under
    `make server`)."""
    from ehrbench.errors import EhrbenchError
    from ehrbench.evaluation.results import readable_parts
    from ehrbench.reports.assemble import newest_run

    root = data_root(data_dir)
    if run_id is not None:
        check_run_id(run_id)
    checked(ReportParameters, {"bootstrap_replicates": bootstrap, "bootstrap_seed": seed})
    if trend_prefix:
        check_run_id(trend_prefix, "--trend-prefix")
    if out is not None and out.exists() and not out.is_dir():
        refuse(f"--out: {out} is a file; expected a folder (it is replaced whole)")
    results = DataLayout(root=root).results
    try:  # a missing run, or a part that is no trial part, is named before any Prefect start-up
        run_id = run_id or newest_run(results)
        readable_parts(results / f"run_id={run_id}")
    except EhrbenchError as exc:
        fail(str(exc), EXIT_FAILED)
    use_prefect(root, verbose=verbose)
    with flow_failures(), following_flows(verbose), prefect_api() as api_ready:
        from flows.report import render_report

        api_ready()
        index = render_report(run_id=run_id, trend_prefix=trend_prefix, bootstrap_replicates=bootstrap,
                              bootstrap_seed=seed, report_dir=str(out.resolve()) if out else None, data_dir=str(root))
    _result(index)



def _result(path: str) -> None:
    """The command's result on stdout for scripts (`folder=$(ehrbench build …)`); a person at a terminal has read it
    in the progress lines, which end with the summary and the next steps."""
    if not sys.stdout.isatty():
        typer.echo(path)


def main() -> None:  # pragma: no cover - console entry point
    app()
