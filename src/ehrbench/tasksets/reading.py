"""Reading published task files with one-line errors: every message names the file, the task (its published id, or
the item's position when it has none) and what was expected, and is a ConfigError (refused input: nothing is
written)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ehrbench.errors import ConfigError
from ehrbench.tasksets.model import SourceFile


def read_json(path: Path, expected: str, *, lines: bool = False) -> Any:
    """The JSON value of `path`. With `lines`, a file that is not one JSON document may be JSON Lines (one value per
    line; the values come back as a list, also when there is one object)."""
    if not path.is_file():
        raise ConfigError(f"{path}: {'not a file' if path.exists() else 'not found'}; expected {expected}")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        value = json.loads(text)
        return [value] if lines and isinstance(value, dict) else value  # JSON Lines of one line
    except json.JSONDecodeError as exc:
        if lines:
            values = _json_lines(text)
            if values is not None:
                return values
        raise ConfigError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                          f"expected {expected}") from None


def _json_lines(text: str) -> list | None:
    try:
        values = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return None
    return values or None


def require_kind(value: Any, kind: type | tuple[type, ...], path: Path, expected: str) -> Any:
    if not isinstance(value, kind):
        raise ConfigError(f"{path}: holds {kind_of(value)}; expected {expected}")
    return value


def item_id(item: Any, index: int, path: Path, id_field: str, expected: str) -> str:
    """The published id of the `index`-th item (0-based) of a task list."""
    if not isinstance(item, dict):
        raise ConfigError(f"{path}: item {index} is {kind_of(item)}; expected {expected}")
    value = item.get(id_field)
    if value is None:
        raise ConfigError(f"{path}: item {index}: no field {id_field!r}; expected {expected}")
    if not isinstance(value, (str, int)) or isinstance(value, bool) or str(value) == "":
        raise ConfigError(f"{path}: item {index}: field {id_field!r} is {kind_of(value)}; expected a task id")
    return str(value)


def field(item: dict, name: str, path: Path, task: str, kind: type | tuple[type, ...] = str,
          expected: str = "text") -> Any:
    """`item[name]`, required, of `kind`."""
    if name not in item or item[name] is None:
        raise ConfigError(f"{path}: task {task}: no field {name!r}; expected {expected}")
    value = item[name]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(f"{path}: task {task}: field {name!r} is {kind_of(value)}; expected {expected}")
    return value


def unique(ids: list[tuple[str, Path]]) -> None:
    """Every published id once (a prediction file and the results key tasks by it)."""
    seen: dict[str, Path] = {}
    for task, path in ids:
        if task in seen:
            where = "" if seen[task] == path else f" (also in {seen[task]})"
            raise ConfigError(f"{path}: task {task}: appears twice{where}; expected every task id once")
        seen[task] = path


def source_file(path: Path) -> SourceFile:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return SourceFile(path=str(path.resolve()), sha256=digest.hexdigest(), bytes=path.stat().st_size)


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    names = {dict: "an object", list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)
