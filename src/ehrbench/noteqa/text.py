"""How ehrbench compares note-QA texts (its own rules; EHRNoteQA's judge compares meaning): texts case and runs of
whitespace aside, five options that differ so, and the first standalone letter A-E of a reply (the stand-in for the
judge on multiple-choice, and the blind model's pick when filtering LLM-written questions)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ehrbench.noteqa.published import LETTERS

_LETTER = re.compile(r"\b([A-E])\b")


def plain(text: str) -> str:
    """`text` lower-cased with its runs of whitespace as single spaces, trimmed."""
    return " ".join(text.lower().split())


def options_distinct(choices: Iterable[str | None]) -> bool:
    """Five written options, no two the same after `plain`."""
    written = list(choices)
    return len(written) == len(LETTERS) and all(written) and len({plain(c) for c in written}) == len(LETTERS)


def first_letter(text: str | None) -> str | None:
    """The first standalone capital A-E of `text`, None when there is none."""
    found = _LETTER.search(text or "")
    return found.group(1) if found else None
