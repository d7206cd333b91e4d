"""Input checks of the commands that start Prefect: a bad option is refused before Prefect is imported or a
temporary Prefect server started — one line on stderr, `ehrbench: error: <option>: expected …, got …`, exit code 2."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.text import Text

from ehrbench.environment import variable
from ehrbench.errors import ConfigError, EhrbenchError
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.parameter_errors import Loc, one_line
from ehrbench.settings import RUN_ID_FORM, SOURCE_DIRS, BuildParameters, default_data_dir, is_run_id

# Messages echo user text (agent specs, paths): no markup, no emoji codes, no highlighting.
err = Console(stderr=True, markup=False, emoji=False, highlight=False)

DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", help="Data directory (raw/, warehouse, benchmarks/). Default: $EHRBENCH_DATA_DIR or ./data")]

EXIT_FAILED = 1  # the command ran and failed
EXIT_BAD_INPUT = 2  # the command was refused before starting anything (click's own usage errors use 2 as well)

_CURRENT_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
M = TypeVar("M", bound=BaseModel)


def fail(message: str, exit_code: int) -> NoReturn:
    """One line on stderr, `ehrbench: error: <message>`, and exit."""
    err.print(Text.assemble(("ehrbench: error:", "bold red"), " ", message), soft_wrap=True)
    raise typer.Exit(exit_code)


def refuse(message: str) -> NoReturn:
    """Bad user input: nothing was started."""
    fail(message, EXIT_BAD_INPUT)


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def data_root(data_dir: Path | None) -> Path:
    root = (data_dir or default_data_dir()).resolve()
    if root.exists() and not root.is_dir():
        refuse(f"--data-dir: {root} is a file; expected a directory")
    return root


def check_run_id(run_id: str, option: str = "--run-id") -> None:
    if not is_run_id(run_id):  # the folder name results/run_id=<id>: one plain path component
        refuse(f"{option}: expected {RUN_ID_FORM}, got {run_id!r}")


def check_build(layout: DataLayout, build: str) -> None:
    """`build` names a published build (a folder with manifest.json) the way the flows resolve it."""
    folder = layout.build_folder(build)
    if BuildLayout(folder).manifest.is_file():
        return
    if build == "latest":
        refuse(f"--build: no published build in {layout.benchmarks}; run 'ehrbench build' first")
    what = "no build folder" if not folder.is_dir() else "a folder without manifest.json"
    refuse(f"--build: {what} at {folder}; expected 'latest', a build id or a build folder "
            "(list builds with 'ehrbench builds')")


def check_sandbox(agents: list[str], agent_options: dict, unsafe: bool) -> None:
    """LLM agents run SQL and Python only under bubblewrap, unless --unsafe-sandbox: refuse before Prefect starts."""
    from ehrbench.agents.config import parse_agents
    from ehrbench.agents.sandbox import SandboxUnavailable, isolation

    if not any(config.kind == "llm" for config in parse_agents(agents, agent_options)):
        return
    try:
        isolation(allow_unsafe=unsafe)
    except SandboxUnavailable as exc:
        refuse(f"--agent: {exc}")


def check_model_spec(spec: str, source: str) -> None:
    from ehrbench.llm.chat import ModelSpec

    try:
        ModelSpec.parse(spec)
    except ConfigError as exc:
        refuse(f"{source}: {exc}")


# Parameters whose option is not --<field> (BuildParameters with its QuestionSettings, DqSettings;
# EvaluationParameters).
_OPTION_OF_FIELD = {"per_template": "--questions-per-template", "recipes": "--dq-recipes",
                    "concurrency_per_endpoint": "--concurrency", "suites": "--suite", "agents": "--agent",
                    "bootstrap_replicates": "--bootstrap", "bootstrap_seed": "--seed"}


def option_name(loc: Loc) -> str:
    """The command-line option of a parameter: its last named part as --kebab-case, unless renamed above."""
    field = next((str(part) for part in reversed(loc) if isinstance(part, str)), "")
    return _OPTION_OF_FIELD.get(field, "--" + field.replace("_", "-"))


def checked(model: type[M], values: dict[str, Any]) -> M:
    """`values` as `model`, or refused in one line naming the option, the value and its range."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        refuse(one_line(exc, model, option_name))


def build_parameters(given: dict[str, Any]) -> BuildParameters:
    """The build's parameters as the flow will construct them (options, else EHRBENCH_* variables), checked."""
    if given.get("current_time") is not None:  # the field's pattern takes month 13; dbt would fail much later
        try:
            datetime.strptime(given["current_time"], _CURRENT_TIME_FORMAT)
        except ValueError:
            refuse(f"--current-time: expected 'YYYY-MM-DD HH:MM:SS', got {given['current_time']!r}")
    try:
        parameters = BuildParameters.from_environment(**given)
    except ValidationError as exc:
        refuse(one_line(exc, BuildParameters, option_name))
    _check_shifted_time(parameters)
    for field in SOURCE_DIRS:
        path: Path | None = getattr(parameters, field)
        if path is not None and not path.is_dir():
            source = "--" + field.replace("_", "-") if given.get(field) else f"${variable(field)}"
            refuse(f"{source}: {path} {'is not a directory' if path.exists() else 'does not exist'}; "
                    "expected a release directory")
    for name in ("paraphrase_model", "note_question_model"):
        model = getattr(parameters.questions, name)
        if model:
            from_option = given["questions"].get(name)
            check_model_spec(model, "--" + name.replace("_", "-") if from_option else f"${variable(name)}")
    if parameters.dq.recipes:  # a broken recipe file fails before any stage runs
        from ehrbench.dq.recipes import load_recipes

        try:
            load_recipes(parameters.dq.recipes)
        except EhrbenchError as exc:  # ConfigError, MissingInputError
            refuse(f"--dq-recipes: {exc}")
    return parameters


def _check_shifted_time(parameters: BuildParameters) -> None:
    """'Now' of each time-shifted database must not lie before its first shifted year: dbt would keep no stay (the
    flow refuses it too, but only after Prefect started)."""
    from ehrbench.profiles import EHRSQL2024_DEFAULTS, EICU_PRESETS

    eicu = EICU_PRESETS[parameters.eicu_preset]
    for profile, defaults in (("ehrsql2024", EHRSQL2024_DEFAULTS), ("ehrsql_eicu", eicu)):
        now = parameters.current_time or defaults["current_time"]
        start_year = parameters.start_year or defaults["start_year"]
        if int(now[:4]) >= start_year:
            continue
        if parameters.current_time:
            refuse(f"--current-time {now!r}: must not lie before the first shifted year {start_year} "
                   f"(--start-year{'' if parameters.start_year else ', default'} {start_year})")
        refuse(f"--start-year {start_year}: must not lie after {now}, 'now' of the {profile} database by default; "
               "give a later --current-time")
