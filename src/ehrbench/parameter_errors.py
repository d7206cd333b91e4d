"""One line per bad parameter, from a pydantic ValidationError: the parameter's name, the value given, what it must
be and what it means, e.g. `--time-span 1000000000: must be between 0 and 200 (years the shifted first visits spread
over)`. The command line names options (`--time-span`), a flow run its parameters (`time_span`,
`questions.per_template`).

The allowed range is read from the model's field (both bounds, also when only one was crossed), the meaning from the
first clause of the field's description; several bad parameters are joined with "; " on the same line.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from ehrbench.errors import ConfigError

Loc = tuple[str | int, ...]
_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}
_LENGTH_ERRORS = {"too_short", "too_long"}


class ParameterError(ConfigError):
    """A parameter outside its range or form; the message is one line naming it (a ConfigError: the CLI reports it on
    one line)."""


def parameter_name(loc: Loc) -> str:
    """A flow parameter as Prefect shows it: `time_span`, `questions.per_template` (list positions left out)."""
    return ".".join(str(part) for part in loc if isinstance(part, str))


def path_with_positions(loc: Loc) -> str:
    """A parameter inside lists, e.g. `tasks.0.recipes.1.count`."""
    return ".".join(map(str, loc))


def one_line(exc: ValidationError, model: type[BaseModel], name_of: Callable[[Loc], str] = parameter_name) -> str:
    """Every error of `exc` (raised validating `model`) as `<name> <value>: <must be …> (<meaning>)`, on one line."""
    text = "; ".join(_problem(error, model, name_of) for error in exc.errors())
    return " ".join(text.splitlines())  # a validator's own message may span lines


@contextmanager
def one_line_errors(model: type[BaseModel], name_of: Callable[[Loc], str] = parameter_name) -> Iterator[None]:
    """Turn a ValidationError of `model` raised inside the block into a one-line ParameterError."""
    try:
        yield
    except ValidationError as exc:
        raise ParameterError(one_line(exc, model, name_of)) from None


def _problem(error: dict[str, Any], model: type[BaseModel], name_of: Callable[[Loc], str]) -> str:
    loc = tuple(error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if not loc:  # a model-level check: its own message names what it compares
        return message
    if error["type"] == "extra_forbidden":
        return f"{name_of(loc)} {_shown(error['input'])}: unknown; expected one of {', '.join(_siblings(model, loc))}"
    field = field_at(model, loc)
    requirement = _requirement(error, field) if field is not None else _must(message)
    meaning = _meaning(field) if field is not None and isinstance(loc[-1], str) else ""
    shown = "" if error["type"] == "missing" or isinstance(error["input"], dict) else f" {_shown(error['input'])}"
    return f"{name_of(loc)}{shown}: {requirement}" + (f" ({meaning})" if meaning else "")


def field_at(model: type[BaseModel], loc: Loc) -> FieldInfo | None:
    """The field a pydantic error location points at, through nested models, lists and optionals."""
    current: type[BaseModel] | None = model
    field = None
    for part in loc:
        if isinstance(part, int):
            continue
        if current is None or part not in current.model_fields:
            return None
        field = current.model_fields[part]
        current = _nested_model(field.annotation)
    return field


def _siblings(model: type[BaseModel], loc: Loc) -> list[str]:
    """The fields of the model holding the last part of `loc`."""
    parent = field_at(model, loc[:-1]) if any(isinstance(part, str) for part in loc[:-1]) else None
    holder = _nested_model(parent.annotation) if parent is not None else model
    return list((holder or model).model_fields)


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType, list, tuple, set, dict):
        return next((m for m in map(_nested_model, get_args(annotation)) if m is not None), None)
    return None


def _requirement(error: dict[str, Any], field: FieldInfo) -> str:
    if error["type"] in _RANGE_ERRORS:
        return _range(field) or _must(error["msg"])
    if error["type"] in _LENGTH_ERRORS:
        return _length(field) or _must(error["msg"])
    if error["type"] == "string_pattern_mismatch":
        return f"must match {error['ctx']['pattern']}"
    if error["type"] == "missing":
        return "is required"
    return _must(error["msg"].removeprefix("Value error, "))


def _range(field: FieldInfo) -> str:
    """Both bounds of a numeric field: `must be between 0 and 200`, `must be more than 0 and at most 3600`."""
    low = high = None
    for bound in field.metadata:
        if isinstance(bound, annotated_types.Ge):
            low = ("at least", bound.ge)
        elif isinstance(bound, annotated_types.Gt):
            low = ("more than", bound.gt)
        elif isinstance(bound, annotated_types.Le):
            high = ("at most", bound.le)
        elif isinstance(bound, annotated_types.Lt):
            high = ("less than", bound.lt)
    if low and high:
        if low[0] == "at least" and high[0] == "at most":
            return f"must be between {low[1]} and {high[1]}"
        return f"must be {low[0]} {low[1]} and {high[0]} {high[1]}"
    bound = low or high
    return f"must be {bound[0]} {bound[1]}" if bound else ""


def _length(field: FieldInfo) -> str:
    low = next((b.min_length for b in field.metadata if isinstance(b, annotated_types.MinLen)), None)
    high = next((b.max_length for b in field.metadata if isinstance(b, annotated_types.MaxLen)), None)
    if low is not None and high is not None:
        return f"must name between {low} and {high}"
    if low is not None:
        return f"must name at least {low}"
    return f"must name at most {high}" if high is not None else ""


def _must(message: str) -> str:
    """pydantic's `Input should be …` as `must be …`; our own validators' messages stay as written."""
    return "must be " + message.removeprefix("Input should be ") if message.startswith("Input should be ") else message


def _meaning(field: FieldInfo) -> str:
    """The description's first clause, e.g. 'Years the shifted first visits spread over (default 0).' → 'years the
    shifted first visits spread over'."""
    clause = re.split(r" \(|; |: |\. |\.$", (field.description or "").strip(), maxsplit=1)[0]
    return clause[:1].lower() + clause[1:] if clause[1:2].islower() else clause


def _shown(value: Any) -> str:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else repr(value)
