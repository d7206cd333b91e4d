"""Transcripts as the task page shows them: messages with their tool calls, the call each tool result answers
(long results cut), the simulated user's attempts and any other field as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ehrbench.reports.site_format import pretty_json

TOOL_RESULT_CHARS = 4_000
# Transcript fields shown as such; anything else in an entry is shown as JSON.
_MESSAGE_FIELDS = {"role", "content", "tool_calls", "tool_call_id", "name", "user_attempts"}


def transcript_view(entries: Sequence[Any]) -> list[dict]:
    """A transcript as the task page shows it: per entry its role, text, tool calls, the call a tool result answers,
    the simulated user's attempts (harness entries) and any other field as JSON."""
    call_names: dict[str, str] = {}
    return [_message_view(entry, call_names) for entry in entries]


def _message_view(entry: Any, call_names: dict[str, str]) -> dict:
    if not isinstance(entry, dict):
        return _message(role="unknown", extra=pretty_json(entry))
    calls = [_tool_call_view(call) for call in entry.get("tool_calls") or []]
    call_names.update((call["id"], call["name"]) for call in calls if call["id"])
    content = _content_text(entry.get("content"))
    answers = None
    omitted = 0
    if entry.get("tool_call_id") is not None:
        call_id = str(entry["tool_call_id"])
        answers = {"id": call_id, "name": call_names.get(call_id) or entry.get("name") or "?"}
        if content is not None and len(content) > TOOL_RESULT_CHARS:
            content, omitted = content[:TOOL_RESULT_CHARS], len(content) - TOOL_RESULT_CHARS
    attempts = entry.get("user_attempts")
    extra = {key: value for key, value in entry.items() if key not in _MESSAGE_FIELDS}
    if attempts is not None and not isinstance(attempts, list):
        extra["user_attempts"], attempts = attempts, None
    return _message(role=str(entry.get("role") or "unknown"), name=entry.get("name"), content=content,
                    tool_calls=calls, answers=answers, omitted=omitted,
                    attempts=[_attempt_view(i, a) for i, a in enumerate(attempts or [], start=1)],
                    extra=pretty_json(extra) if extra else None)


def _message(role: str, name: str | None = None, content: str | None = None, tool_calls: list | None = None,
             answers: dict | None = None, omitted: int = 0, attempts: list | None = None,
             extra: str | None = None) -> dict:
    return {"role": role, "name": name, "content": content, "tool_calls": tool_calls or [], "answers": answers,
            "omitted": omitted, "attempts": attempts or [], "extra": extra}


def _content_text(content: Any) -> str | None:
    """Message content as text: strings as they are, OpenAI text parts joined, anything else as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    return pretty_json(content)


def _tool_call_view(call: Any) -> dict:
    if not isinstance(call, dict):
        return {"id": "", "name": "?", "arguments": pretty_json(call)}
    function = call.get("function") or {}
    return {"id": str(call.get("id") or ""), "name": str(function.get("name") or "?"),
            "arguments": _arguments_text(function.get("arguments"))}


def _arguments_text(arguments: Any) -> str:
    """Arguments are a JSON string in OpenAI's format: pretty-printed when they parse, as sent when not."""
    if isinstance(arguments, str):
        try:
            return pretty_json(json.loads(arguments))
        except ValueError:
            return arguments
    return pretty_json(arguments)


def _attempt_view(number: int, attempt: Any) -> dict:
    if not isinstance(attempt, dict):
        return {"number": number, "valid": None, "validator": None, "messages": [], "extra": pretty_json(attempt)}
    extra = {k: v for k, v in attempt.items() if k not in ("conversation", "valid", "validator")}
    conversation = attempt.get("conversation")
    return {"number": number, "valid": attempt.get("valid"), "validator": attempt.get("validator"),
            "messages": transcript_view(conversation if isinstance(conversation, list) else []),
            "extra": pretty_json(extra) if extra else None}
