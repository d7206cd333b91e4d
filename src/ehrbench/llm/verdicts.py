"""Reading a model's JSON verdict (`{"ok": true, ...}`, `{"correct": false, ...}`) out of whatever it wrote around
it: bare, in a code fence, amid prose — models asked for JSON often add some. Used by the simulated user's verifier
and validator and by the answer judge."""

from __future__ import annotations

import json
from collections.abc import Callable


def first_json_object(text: str | None, accepted: Callable[[dict], bool]) -> dict | None:
    """The first JSON object in `text` (bare, fenced or amid prose) that `accepted` takes; None when there is none."""
    text = text or ""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict) and accepted(value):
            return value
        start = text.find("{", start + 1)
    return None


def verdict(text: str | None, key: str) -> tuple[bool, dict] | None:
    """(flag, object) of the first JSON object in `text` whose `key` is a boolean (or "true"/"false"); None when
    there is none (an unreadable verdict, which each caller handles its own way)."""
    value = first_json_object(text, lambda obj: _flag(obj.get(key)) is not None)
    return (_flag(value[key]), value) if value is not None else None


def _flag(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None
