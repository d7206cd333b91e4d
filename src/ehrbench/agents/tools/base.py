"""What every agent toolbox offers the agent loop, and the dispatch and text shaping the toolboxes share.

A toolbox answers every call with text for the model. The model's mistakes (bad arguments, failing SQL, unknown
names, timeouts) are answers too, starting with "Error: " and saying what is expected, so one bad call costs the
model a turn, never the trial.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ehrbench.llm.tool_chat import ToolCall, ToolSpec

DEFAULT_MAX_CHARS = 6000
ERROR_PREFIX = "Error: "


class Toolbox(Protocol):
    specs: list[ToolSpec]  # the tools offered to the model

    def call(self, call: ToolCall) -> str:
        """The tool's result as text for the model; never raises for anything the model did wrong."""
        ...


class ToolError(Exception):
    """A call the model got wrong; the message (without the "Error: " prefix) says what is expected."""


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    run: Callable[..., str]  # called with the checked arguments as keywords


def dispatch(tools: Mapping[str, Tool], call: ToolCall, expected: tuple[type[Exception], ...] = ()) -> str:
    """Run the call on the tool it names. ToolError and the `expected` exceptions (engine errors whose message is
    fit for the model) come back as "Error: ..." text."""
    if call.error:
        return ERROR_PREFIX + call.error
    tool = tools.get(call.name)
    if tool is None:
        return f"{ERROR_PREFIX}there is no tool named {call.name!r}; the tools are: {', '.join(tools) or 'none'}"
    try:
        return tool.run(**checked_arguments(tool.spec, call.arguments))
    except (ToolError, *expected) as exc:
        return ERROR_PREFIX + str(exc)


def checked_arguments(spec: ToolSpec, arguments: dict | None) -> dict[str, Any]:
    """The arguments with their JSON-schema types enforced: required ones present, no unknown ones, strings as
    strings, integers as ints (an integral float or a digit string is accepted: models write both)."""
    arguments = arguments or {}
    properties: dict = spec.parameters.get("properties", {})
    usage = f"{spec.name!r} takes: {', '.join(properties) or 'no arguments'}"
    if unknown := [name for name in arguments if name not in properties]:
        raise ToolError(f"unexpected argument(s) {', '.join(map(repr, unknown))}; {usage}")
    if missing := [name for name in spec.parameters.get("required", []) if arguments.get(name) is None]:
        raise ToolError(f"missing required argument(s) {', '.join(map(repr, missing))}; {usage}")
    checked = {}
    for name, value in arguments.items():
        if value is None:  # an explicit null for an optional argument means its default
            continue
        kind = properties[name].get("type")
        if kind == "string":
            if not isinstance(value, str):
                raise ToolError(f"argument {name!r} must be a string, got {type(value).__name__}")
            value = value.replace("\x00", "")  # a NUL would end the string early in C code below (SQLite)
        elif kind == "integer":
            value = _integer(name, value)
        checked[name] = value
    return checked


def _integer(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ToolError(f"argument {name!r} must be an integer, got {value!r}")


def bounded_count(name: str, value: int, maximum: int) -> tuple[int, bool]:
    """`value` capped at `maximum` (and whether it was); below 1 is the model's error."""
    if value < 1:
        raise ToolError(f"{name} must be an integer from 1 to {maximum}, got {value}")
    return min(value, maximum), value > maximum


# --- text for the model ----------------------------------------------------------------------------------------------

def truncated(text: str, max_chars: int, how_to_narrow: str) -> str:
    """`text` cut at a line boundary to fit `max_chars`, with a note saying so and how to ask for less."""
    if len(text) <= max_chars:
        return text
    note_room = 300  # the note itself must fit too
    cut = text.rfind("\n", 0, max(max_chars - note_room, 0))
    kept = text[:cut] if cut > 0 else text[: max(max_chars - note_room, 0)]
    shown, total = kept.count("\n") + 1, text.count("\n") + 1
    return (f"{kept}\n[output truncated to {len(kept)} of {len(text)} characters "
            f"({shown} of {total} lines shown); {how_to_narrow}]")
