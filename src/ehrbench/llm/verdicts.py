"""Reading a model's JSON verdict (`{"ok": true, ...}`, `{"correct": false, ...}`) out of whatever it wrote around
it: bare, in a code fence, amid prose — models asked for JSON often add some. Used by the simulated user's verifier
and validator and by the answer judge."""

from __future__ import annotations

import json


def verdict(text: str | None, key: str) -> tuple[bool, dict] | None:
    """(flag, object) of the first JSON object in `text` whose `key` is a boolean (or "true"/"false"); None when
    there is none (an unreadable verdict, which each caller handles its own way)."""
    text = text or ""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        flag = _flag(value.get(key)) if isinstance(value, dict) else None
        if flag is not None:
            return flag, value
        start = text.find("{", start + 1)
    return None


def _flag(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None
