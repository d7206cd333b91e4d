"""Correctness of a free-text or list answer against an EHRSQL-2024 gold answer string
(docs/benchmarks.md#ehrsql-2024-answer-comparison-and-reliability-score).

The gold is the `answer_text` of a question, e.g. "[['2100-12-20 01:43:00']]", "[['6.51']]", "[['0']]",
"[['aspirin'], ['heparin']]" or "[]". An agent answers in prose or values ("The last admission was on 2100-12-20
at 01:43.", ["2100-12-20T01:43:00-04:00"], "yes", "6.51 mg/dL", "aspirin, heparin"). The rules are strict but not
pedantic, and deterministic; whatever they cannot accept is left to the LLM judge (`evaluation.judge`), which is only
consulted when they say no — so the rules prefer a false "no" to a false "yes".

Values (`normalise_value`) — one canonical string per value, so that equal answers compare equal:
- text: case-folded, whitespace collapsed, surrounding quotes/backticks/asterisks and one trailing "." removed
  (gold "ew emer." == "EW EMER");
- booleans: yes/true → "1", no/false → "0" (gold stores a boolean question's answer as '1'/'0', or 'True'/'False');
- gender: male → "m", female → "f" (MIMIC stores m/f, FHIR Patient.gender says male/female);
- None, "none", "null" → "none" (gold 'None' is a row whose value is NULL);
- numbers: rounded to 3 decimals like the EHRSQL-2024 scorer, written without trailing zeros ("6.510" == "6.51",
  "1.0" == "1"; "40,955" == "40955");
- datetimes: ISO dates with an optional time ("T" or space, also "2100-12-20 at 01:43"), seconds optional, an offset
  optional. The build writes FHIR times at the fixed offset -04:00, whose wall clock is the SQL time: an offset of
  -04:00 is dropped, any other ("Z", "+00:00") is converted to -04:00 first, a naive time is taken as wall clock.
  Canonical form "YYYY-MM-DD HH:MM:SS"; fractional seconds are dropped; a midnight time is written as its date, so a
  date answers a gold time of 00:00:00 (FHIR birthDate vs the SQL dob) and vice versa. A time without seconds means
  ":00": it matches a gold time to the minute only when the gold's seconds are 00, as the gold has it.

Answers (`answer_matches`):
- None never matches.
- Empty gold "[]" matches only an explicit empty answer: [], "", "[]", "none", "null", "n/a", "no results",
  "no result", "no records", "no data" (prose such as "the patient had no admissions" is left to the judge).
  Non-empty gold never matches those, except a gold [['None']] (a row whose value is NULL), which any of them
  answers.
- The gold values form a set (order and duplicates ignored). A list answer (nested lists flattened) must give exactly
  that set. A string answer must, as a whole, be the single gold value, or list exactly the gold set: it is read as a
  Python/JSON list if it looks like one, else split on newlines/";" (then also "," and " and"; bullets and a lead-in
  ending in ": " are ignored), or — for values that contain commas, like "obesity, unspecified" — every gold value
  must occur in it, bounded by separators, with nothing but separators left once they are removed.
- Gold with several columns and several rows (e.g. daily minimum values) must be answered as rows (a list of lists),
  compared as a set of rows, so that values cannot be paired with the wrong date; a single row is a set of values.
- Prose, for single-value gold: the candidate values of the gold's kind are read from the text and must be exactly
  the gold value. Datetimes: the ISO dates/times in the text (a 12-hour "01:43 PM" is not read as a time).
  Numbers: the numbers in the text that are not part of a date, a time, a word ("o2") or a patient-id echo
  ("patient 10005817"), so "The value was 6.51 mg/dL." matches 6.51 and "between 6.51 and 7.2" does not.
  Booleans ('1'/'0'): the words yes/no/true/false, or the numbers when there is no such word. Gender:
  male/female/m/f. Other text: the gold phrase must occur bounded by the start or a space/quote/colon before it and
  by the end or punctuation after it ("Discharged home." matches "home", "home health care" does not). For numbers,
  datetimes and text, a negation word (not, no, never, none, n't) rejects the prose, since "was not discharged
  home" contains the gold too. A gold [['None']] is never read from prose.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import re
from collections.abc import Iterable

FLOAT_DIGITS = 3
# The build's fixed local offset for FHIR times (the SQL times are this wall clock,
# docs/benchmarks.md#fhir-agentbench-data-and-ground-truth).
LOCAL_OFFSET = dt.timezone(dt.timedelta(hours=-4))

EMPTY_ANSWERS = frozenset({"", "[]", "none", "null", "n/a", "no results", "no result", "no records", "no data"})
_BOOLEANS = {"yes": "1", "true": "1", "no": "0", "false": "0"}
_GENDERS = {"male": "m", "female": "f", "m": "m", "f": "f"}
_NONES = frozenset({"none", "null"})

_DATETIME = (r"(\d{4})-(\d{2})-(\d{2})"
             r"(?:(?:[T ]|\s+at\s+)(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?\s*(Z|[+-]\d{2}:?\d{2})?)?")
_DATETIME_FULL = re.compile(_DATETIME, re.IGNORECASE)
# In prose a datetime must stand alone, and a 12-hour time ("01:43 PM") is not read as one.
_DATETIME_IN_TEXT = re.compile(rf"(?<![\w-]){_DATETIME}(?![\w:])(?!\s*[ap]\.?m\b)", re.IGNORECASE)
_TIME_IN_TEXT = re.compile(r"(?<![\w:])\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\b)?", re.IGNORECASE)
_NUMBER = r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[+-]?\.\d+"
_NUMBER_FULL = re.compile(_NUMBER)
_NUMBER_IN_TEXT = re.compile(rf"(?<![\w.,])(?:{_NUMBER})(?![\w,]*\d)")
_PATIENT_ID = re.compile(r"\bpatient(?:\s+id)?\s*(?:#|no\.)?\s*:?\s*\d+", re.IGNORECASE)
_BOOLEAN_WORDS = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
_GENDER_WORDS = re.compile(r"\b(male|female|m|f)\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|no|never|none)\b|n['’]t\b", re.IGNORECASE)
_SPLITS = (re.compile(r"[\n;]+"), re.compile(r"[\n;,]+"), re.compile(r"[\n;,]+|\s+and\s+"))
_BULLET = re.compile(r"^(?:[-*•]|\d+[.)])\s+|^and\s+")
_SEPARATORS_LEFT = re.compile(r"[\s,;.\[\]\"'*•-]+|\band\b")
_WRAPPERS = "\"'`*"


def _clean_text(text: str) -> str:
    text = " ".join(text.split()).casefold().strip(_WRAPPERS).strip()
    return text[:-1].rstrip() if text.endswith(".") else text


def _format_number(number: float) -> str:
    if not math.isfinite(number):
        return str(number)
    rounded = round(number, FLOAT_DIGITS)
    return str(int(rounded)) if rounded == int(rounded) else repr(rounded)


def _format_datetime(moment: dt.datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(LOCAL_OFFSET).replace(tzinfo=None)
    moment = moment.replace(microsecond=0)
    return moment.date().isoformat() if moment.time() == dt.time(0) else moment.isoformat(sep=" ")


def _parse_datetime(match: re.Match) -> str | None:
    year, month, day, hour, minute, second, offset = match.groups()
    try:
        moment = dt.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0))
    except ValueError:  # e.g. 2100-02-30: not a date, so plain text
        return None
    if offset:
        offset = offset.upper().replace("Z", "+00:00")
        sign = -1 if offset[0] == "-" else 1
        hours, minutes = int(offset[1:3]), int(offset[-2:])
        moment = moment.replace(tzinfo=dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes)))
    return _format_datetime(moment)


def normalise_value(value: object) -> str:
    """One cell or answer value in canonical form (rules in the module docstring)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return _format_number(float(value))
    if isinstance(value, dt.datetime):
        return _format_datetime(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    text = _clean_text(str(value))
    if text in _BOOLEANS:
        return _BOOLEANS[text]
    if text in _GENDERS:
        return _GENDERS[text]
    if text in _NONES:
        return "none"
    if match := _DATETIME_FULL.fullmatch(text):
        parsed = _parse_datetime(match)
        if parsed is not None:
            return parsed
    if _NUMBER_FULL.fullmatch(text):
        return _format_number(float(text.replace(",", "")))
    return text


def _gold_rows(gold_answer_text: str) -> list[list[object]]:
    rows = ast.literal_eval(gold_answer_text)
    if not isinstance(rows, list) or not all(isinstance(row, list | tuple) for row in rows):
        raise ValueError(f"not an EHRSQL answer string (a list of rows): {gold_answer_text!r}")
    return [list(row) for row in rows]


def answer_values(gold_answer_text: str) -> list[str]:
    """The gold cells, row by row, normalised (duplicates kept, in gold order)."""
    return [normalise_value(cell) for row in _gold_rows(gold_answer_text) for cell in row]


def _flatten(values: Iterable[object]) -> list[object]:
    flat: list[object] = []
    for value in values:
        flat.extend(_flatten(value) if isinstance(value, list | tuple | set) else [value])
    return flat


def _as_list(text: str) -> list | None:
    """A string that is itself a JSON or Python list ("['aspirin', 'heparin']"), else None."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            parsed = parse(stripped)
        except (ValueError, SyntaxError, RecursionError):
            continue
        if isinstance(parsed, list):
            return parsed
    return None


def _is_explicit_empty(predicted: str | list) -> bool:
    if isinstance(predicted, list):
        return not _flatten(predicted)
    parsed = _as_list(predicted)
    if parsed is not None:
        return not _flatten(parsed)
    return _clean_text(predicted) in EMPTY_ANSWERS


def _split_values(text: str, separator: re.Pattern) -> set[str]:
    parts = (_BULLET.sub("", part.strip()) for part in separator.split(text))
    return {normalise_value(part) for part in parts if part.strip(" " + _WRAPPERS)}


def _covers(text: str, gold: set[str]) -> bool:
    """Every gold value occurs in `text` bounded by separators, and nothing but separators is left."""
    rest = " ".join(text.split()).casefold()
    for value in sorted(gold, key=len, reverse=True):
        bounded = re.compile(rf"(?<![^\s,;:\[(\"'*]){re.escape(value)}(?![^\s,;.\])\"'*])")
        rest, found = bounded.subn(" , ", rest)
        if not found:
            return False
    return not _SEPARATORS_LEFT.sub("", rest)


def _string_lists_set(text: str, gold: set[str]) -> bool:
    candidates = [text]
    if ": " in text:  # "The drugs were: aspirin, heparin"
        candidates.append(text.split(": ", 1)[1])
    for candidate in candidates:
        if any(_split_values(candidate, separator) == gold for separator in _SPLITS) or _covers(candidate, gold):
            return True
    return False


def _kind(gold: str) -> str:
    if _DATETIME_FULL.fullmatch(gold):
        return "datetime"
    if gold in ("0", "1"):
        return "boolean"
    if gold in ("m", "f"):
        return "gender"
    if gold == "none":
        return "none"
    if _NUMBER_FULL.fullmatch(gold):
        return "number"
    return "text"


def _numbers_in(text: str) -> set[str]:
    for not_a_value in (_DATETIME_IN_TEXT, _TIME_IN_TEXT, _PATIENT_ID):
        text = not_a_value.sub(" ", text)
    return {normalise_value(match.group()) for match in _NUMBER_IN_TEXT.finditer(text)}


def _prose_states(text: str, gold: str) -> bool:
    """Single-value gold in a sentence: the values of the gold's kind in `text` are exactly the gold value."""
    kind = _kind(gold)
    if kind == "none":
        return False
    if kind == "boolean":
        words = {_BOOLEANS[word.casefold()] for word in _BOOLEAN_WORDS.findall(text)}
        return (words or _numbers_in(text)) == {gold}
    if kind == "gender":
        return {_GENDERS[word.casefold()] for word in _GENDER_WORDS.findall(text)} == {gold}
    if _NEGATION.search(text):
        return False
    if kind == "datetime":
        found = {_parse_datetime(match) for match in _DATETIME_IN_TEXT.finditer(text)}
        return found == {gold}
    if kind == "number":
        return _numbers_in(text) == {gold}
    phrase = re.escape(gold)
    bounded = rf"(?:^|(?<=[\s:\"'*(\[])){phrase}(?=\s*(?:$|[.,;:!?)\]\"'*(]))"
    return re.search(bounded, " ".join(text.split()).casefold()) is not None


def answer_matches(predicted: str | list | None, gold_answer_text: str) -> bool:
    """Whether `predicted` is the gold answer under the rules of the module docstring."""
    if predicted is None:
        return False
    rows = _gold_rows(gold_answer_text)
    if not isinstance(predicted, str | list):
        predicted = [predicted]  # a bare number, boolean or datetime
    if not rows:
        return _is_explicit_empty(predicted)
    gold = {normalise_value(cell) for row in rows for cell in row}
    if _is_explicit_empty(predicted):
        return gold == {"none"}  # a NULL value: "none", "no data", [] all say there is none

    if len(rows) > 1 and any(len(row) > 1 for row in rows):
        listed = predicted if isinstance(predicted, list) else _as_list(predicted)
        if listed is None or not all(isinstance(row, list | tuple) for row in listed):
            return False
        return ({tuple(normalise_value(cell) for cell in row) for row in listed}
                == {tuple(normalise_value(cell) for cell in row) for row in rows})

    if isinstance(predicted, str):
        listed = _as_list(predicted)
        predicted = listed if listed is not None else predicted
    if isinstance(predicted, list):
        flat = _flatten(predicted)
        if len(flat) != 1 or not isinstance(flat[0], str):
            return {normalise_value(value) for value in flat} == gold
        predicted = flat[0]  # one string in a list: read it like a string answer
    if {normalise_value(predicted)} == gold or _string_lists_set(predicted, gold):
        return True
    return len(gold) == 1 and _prose_states(predicted, next(iter(gold)))
