"""Input checks of the commands that start Prefect: a bad option is refused before Prefect is imported or a
temporary Prefect server started — one line on stderr, `ehrbench: error: <option>: expected …, got …`, exit code 2."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from ehrbench.settings import BuildParameters, DataLayout, default_data_dir

# Messages echo user text (agent specs, paths): no markup, no emoji codes, no highlighting.
err = Console(stderr=True, markup=False, emoji=False, highlight=False)

DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", help="Data directory (raw/, warehouse, benchmarks/). Default: $EHRBENCH_DATA_DIR or ./data")]

EXIT_FAILED = 1  # the command ran and failed
EXIT_BAD_INPUT = 2  # the command was refused before starting anything (click's own usage errors use 2 as well)

# A run id is the folder name results/run_id=<id>: one plain path component.
_RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
_RUN_ID_FORM = "1-200 letters, digits, '.', '_' or '-', not starting with '.' and without '..'"
_CURRENT_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


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
    if not _RUN_ID.fullmatch(run_id) or ".." in run_id:
        refuse(f"{option}: expected {_RUN_ID_FORM}, got {run_id!r}")


def check_build(layout: DataLayout, build: str) -> None:
    """`build` names a published build (a folder with manifest.json) the way the flows resolve it."""
    folder = layout.build_folder(build)
    if (folder / "manifest.json").is_file():
        return
    if build == "latest":
        refuse(f"--build: no published build in {layout.benchmarks}; run 'ehrbench build' first")
    what = "no build folder" if not folder.is_dir() else "a folder without manifest.json"
    refuse(f"--build: {what} at {folder}; expected 'latest', a build id or a build folder "
            "(list builds with 'ehrbench builds')")


def check_model_spec(spec: str, source: str) -> None:
    from ehrbench.llm.chat import ModelSpec

    try:
        ModelSpec.parse(spec)
    except ValueError as exc:
        refuse(f"{source}: {exc}")


# Fields of BuildParameters (and its QuestionSettings, DqSettings) whose option is not --<field>.
_OPTION_OF_FIELD = {"per_template": "--questions-per-template", "recipes": "--dq-recipes"}


def _validation_message(exc: ValidationError) -> str:
    """pydantic's errors as `--option: expected ..., got ...`, joined on one line."""
    problems = []
    for error in exc.errors():
        field = next((str(part) for part in reversed(error["loc"]) if isinstance(part, str)), "")
        option = _OPTION_OF_FIELD.get(field, "--" + field.replace("_", "-"))
        message = error["msg"].removeprefix("Value error, ")
        if message.startswith("Input should be "):
            expected = message.removeprefix("Input should be ")
            if expected.startswith(("greater", "less")):
                expected = "a number " + expected
            message = f"expected {expected}"
        elif error["type"] == "string_pattern_mismatch":
            message = f"expected a value matching {error['ctx']['pattern']}"
        problems.append(f"{option}: {message}, got {error['input']!r}")
    return "; ".join(problems)


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
        refuse(_validation_message(exc))
    for field, variable in (("mimic_iv_dir", "EHRBENCH_MIMIC_IV_DIR"), ("eicu_dir", "EHRBENCH_EICU_DIR"),
                            ("ehrsql2024_dir", "EHRBENCH_EHRSQL2024_DIR")):
        path: Path | None = getattr(parameters, field)
        if path is not None and not path.is_dir():
            source = "--" + field.replace("_", "-") if given.get(field) else f"${variable}"
            refuse(f"{source}: {path} {'is not a directory' if path.exists() else 'does not exist'}; "
                    "expected a release directory")
    paraphrase_model = parameters.questions.paraphrase_model
    if paraphrase_model:
        from_option = given["questions"].get("paraphrase_model")
        check_model_spec(paraphrase_model, "--paraphrase-model" if from_option else "$EHRBENCH_PARAPHRASE_MODEL")
    if parameters.dq.recipes:  # a broken recipe file fails before any stage runs
        from ehrbench.dq.recipes import load_recipes

        try:
            load_recipes(parameters.dq.recipes)
        except (FileNotFoundError, ValueError) as exc:
            refuse(f"--dq-recipes: {exc}")
    return parameters


