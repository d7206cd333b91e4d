"""Another harness's predictions on a task set, scored by the same scorer as ehrbench's trials
(`ehrbench.scoring.<protocol>.score_predictions`): for EHRSQL-2024 and EHRSQL (2022), a JSON object mapping question
id to the predicted SQL or "null" (an abstention), as their scoring programs read it.

The scorer gets the gold as those programs read it — question id → gold SQL or "null" (`label.json`'s form) —, the
predictions, and `execute(sql) -> rows`, which runs a query on the task set's database of its build (read-only
SQLite; raises sqlite3.Error when the query fails). It prepares both queries itself, as the published scorer does."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ehrbench.errors import ConfigError, EhrbenchError
from ehrbench.layout import TaskSetLayout
from ehrbench.tasksets.execution import SqliteDatabase
from ehrbench.tasksets.formats import BuildInfo
from ehrbench.tasksets.model import Target, TaskSetManifest
from ehrbench.tasksets.reading import kind_of, read_json, require_kind
from ehrbench.tasksets.store import read_manifest, read_tasks

SQL_PROTOCOLS = ("ehrsql2024", "ehrsql2022")
PREDICTIONS = 'an object mapping question id to the predicted SQL or "null"'


class ScorerMissing(EhrbenchError):
    """The protocol's scorer (ehrbench.scoring.<protocol>) is not there."""


@dataclass(frozen=True)
class Predictions:
    path: Path
    manifest: TaskSetManifest
    gold: dict[str, str]  # question id -> gold SQL or "null"
    predicted: dict[str, str]  # question id -> predicted SQL or "null"
    target: Target


def read_predictions(taskset: TaskSetLayout, path: Path) -> Predictions:
    """The task set's gold and the prediction file, checked (ConfigError / MissingInputError: refused input)."""
    manifest = read_manifest(taskset)
    if manifest.protocol not in SQL_PROTOCOLS:
        raise ConfigError(f"--taskset: task set {manifest.name!r} is scored by {manifest.protocol}, whose answers "
                          f"are conversations, not a prediction file; evaluate an agent on it with 'ehrbench "
                          f"evaluate --taskset {manifest.name}'")
    if len(manifest.targets) != 1:
        raise ConfigError(f"--taskset: task set {manifest.name!r} runs on {', '.join(manifest.targets)}; expected "
                          f"one database")
    predicted = require_kind(read_json(path, PREDICTIONS), dict, path, PREDICTIONS)
    rows = read_tasks(taskset)
    gold = {row["question_id"]: row["gold_sql_sqlite"] or "null" for row in rows}
    for key, sql in predicted.items():
        if key not in gold:
            raise ConfigError(f"{path}: task {key}: not a task of task set {manifest.name!r}; expected predictions "
                              f"for its questions")
        if not isinstance(sql, str):
            raise ConfigError(f"{path}: task {key}: its prediction is {kind_of(sql)}; expected SQL or \"null\"")
    profile, _, database = manifest.targets[0].partition("/")
    return Predictions(path, manifest, gold, predicted, Target(profile, database))


def score_predictions(predictions: Predictions) -> dict:
    """The published metrics of the predictions (one JSON-able object), from the protocol's scorer, with the current
    time of the task set's database when the scorer takes one. A scorer's ValueError (e.g. ids that EHRSQL-2024's
    scorer requires) is a ConfigError naming the prediction file."""
    manifest = predictions.manifest
    scorer = _scorer(manifest.protocol)
    build = BuildInfo.load(Path(manifest.build.folder))
    now = manifest.current_time.get(str(predictions.target))
    options = {"current_time": now} if now and "current_time" in inspect.signature(scorer).parameters else {}
    with SqliteDatabase(build.database(predictions.target)) as database:
        try:
            return scorer(predictions.gold, predictions.predicted, database.rows, **options)
        except ValueError as exc:
            raise ConfigError(f"{predictions.path}: {str(exc).splitlines()[0]}") from None


def _scorer(protocol: str) -> Callable[..., dict]:
    module_name = f"ehrbench.scoring.{protocol}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name not in (module_name, "ehrbench.scoring"):
            raise
        raise ScorerMissing(f"no scorer for protocol {protocol} ({module_name} is not installed)") from None
    scorer = getattr(module, "score_predictions", None)
    if scorer is None:
        raise ScorerMissing(f"{module_name} has no score_predictions(gold_items, predictions, execute)")
    return scorer
