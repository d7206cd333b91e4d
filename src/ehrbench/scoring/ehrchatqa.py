"""Protocol `ehrchatqa`: EHR-ChatQA's rewards (glee4810/EHR-ChatQA `src/envs/base.py`: `calculate_reward_sql` for
IncreQA, `calculate_reward_ans` for AdaptQA; cell forms from `src/utils.py`; the metrics of `metric.py` are
`ehrbench.metrics.trials`'). docs/benchmarks.md#repeated-trials.

The published rules, reimplemented:

- Result form: every cell that `float()` reads rounded to 4 decimals (`94` → '94.0'), others `str` (None → 'None');
  rows sorted, the first 100. The gold answer (rows) is put in this form too.
- IncreQA: success when some `sql_execute` result of the conversation, non-empty, has a column whose set of values
  (without 'None') equals the set of the gold's FIRST column. Queries that failed count for nothing.
- AdaptQA: in each reply to the user (in order), the first `<answer>…</answer>` (or ```` ```answer … ``` ```` /
  ```` ``` ```` block); success when, for some reply: the answer, lower-cased — or the number it names when it is a
  number word of the published list ("three" → "3") — contains every gold value (the gold's first column, lower-cased;
  an integral number written without ".0", others rounded to 4 decimals), and nothing is left once each gold value
  is removed once (longest first), then every "and", ",", ";", ".0000", ".000", ".00", ".0", "%", "days", "day",
  then trailing zeros, a trailing "." and surrounding whitespace.
- A reward is computed only when the user ends the conversation: a trial that spent the action budget
  (`stop_reason` max_actions) scores 0.

Ours, where ehrbench's harness differs from EHR-ChatQA's:

- Results are read back from the transcript's `sql_execute` texts (`ehrbench.scoring.transcripts`), not re-run: they
  are the first k ≤ 100 rows in the query's order, the published re-run sorts all rows first (the same for results of
  at most 100 rows).
- Rows an agent hands over as its answer (`AgentAnswer.answer_rows`: the oracle's) count as one more executed result.
- An answer string equal to the gold answer string is the gold answer when it is a baseline's, never when it is a
  model's own words (`free_text`): an IncreQA reply cannot pass without running SQL.
- The gold rows are `Gold.answer_rows`; without them the gold answer string's cells (floats already rounded to 3
  decimals) stand in.
- An unanswerable task (EHR-ChatQA has none) is right when the agent abstained.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ehrbench.ehrsql.scoring import answer_rows as rows_of_answer
from ehrbench.scoring.ehrsql2024 import display_answer
from ehrbench.scoring.transcripts import agent_replies, sql_execute_results
from ehrbench.tasks import AgentAnswer, EvalTask, Gold

PROTOCOL = "ehrchatqa"
TASK_TYPES = ("incre", "adapt")
MAX_ROWS = 100
DIGITS = 4
# The number words EHR-ChatQA reads as numbers (its `numeric_to_words`, word → digits): a whole answer equal to one
# of them is read as the number, and a gold value equal to one as well.
NUMBER_WORDS: dict[str, str] = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "fourteen": "14", "sixteen": "16", "nineteen": "19",
    "thirty": "30",
    **{f"{tens}{joint}{unit}": digits for tens, unit, digits in (
        ("twenty", "eight", "28"), ("thirty", "five", "35"), ("thirty", "seven", "37"), ("forty", "eight", "48"),
        ("seventy", "two", "72")) for joint in ("-", " ")},
    **{f"{hundreds} hundred{joint}{rest}": digits for hundreds, rest, digits in (
        ("two", "forty-seven", "247"), ("six", "fifty-nine", "659")) for joint in (" and ", " ")},
}
# an answer block: <answer>…</answer>, ```answer …``` or a bare ``` block; the first in a reply counts
_ANSWER = re.compile(r"(?:<answer>|```answer|```\s*\n)(.*?)(?:</answer>|```)", re.DOTALL)
_LEFTOVERS = ("and", ",", ";", ".0000", ".000", ".00", ".0", "%", "days", "day")  # removed in this order


def result_cell(cell: object) -> str:
    try:
        number = float(cell)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return str(cell)
    return str(round(number, DIGITS))


def result_rows(rows: Iterable[Sequence[object]]) -> list[list[str]]:
    """A result in EHR-ChatQA's form: cells by `result_cell`, rows sorted, the first 100."""
    return sorted([[result_cell(cell) for cell in row] for row in rows])[:MAX_ROWS]


def gold_result(gold: Gold) -> list[list[str]] | None:
    """The gold answer in the result form (None when the task has no gold answer)."""
    if gold.answer_rows is not None:
        return result_rows(gold.answer_rows)
    rows = rows_of_answer(gold.answer_text) if gold.answer_text is not None else None
    return result_rows(rows) if rows is not None else None


def incre_matches(result: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> bool:
    """IncreQA: some column of the (non-empty) result holds exactly the values of the gold's first column."""
    if not result:
        return False
    wanted = {row[0] for row in gold if row}
    return any({value for value in column if value != "None"} == wanted for column in zip(*result, strict=False))


def answer_value(value: object) -> str:
    """A gold value as AdaptQA compares it: lower-cased and stripped; a number integral → '3', else rounded to 4."""
    text = str(value).lower().strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else str(round(number, DIGITS))


def gold_answers(gold: Sequence[Sequence[str]]) -> list[str]:
    """The gold values an AdaptQA answer must give: the first column, as `answer_value`, number words → digits."""
    values = [answer_value(row[0]) for row in gold if row]
    return [NUMBER_WORDS.get(value, value) for value in values]


def adapt_matches(reply: str, golds: Sequence[str]) -> bool:
    """AdaptQA: the reply's first answer block gives the gold values and nothing else (module docstring)."""
    found = _ANSWER.search(reply)
    if found is None:
        return False
    answer = found.group(1).strip().lower()
    for value in golds:
        answer = NUMBER_WORDS.get(answer, answer)
        if value.lower() not in answer:
            return False
    rest = answer
    for value in sorted(golds, key=len)[::-1]:
        rest = rest.replace(value, "", 1)
    for leftover in _LEFTOVERS:
        rest = rest.replace(leftover, "")
    return not rest.rstrip("0").rstrip(".").strip()


def answer_blocks(replies: Iterable[str]) -> list[str]:
    """The answer block of each reply that has one (what the results show for an AdaptQA trial)."""
    return [found.group(1).strip() for reply in replies if (found := _ANSWER.search(reply))]


def task_type(gold: Gold) -> str:
    """incre or adapt; a task that does not say is IncreQA (EHR-ChatQA's SQL-result rule)."""
    return gold.task_type if gold.task_type in TASK_TYPES else "incre"


def score_trial(task: EvalTask, answer: AgentAnswer) -> dict:
    """reward and correct of one conversation (module docstring)."""
    gold = task.gold
    kind = task_type(gold)
    replies = agent_replies(answer.transcript)
    shown = ("; ".join(answer_blocks(replies)) or None) if kind == "adapt" else None
    result = {"answer": shown or display_answer(answer)}
    if not gold.is_answerable:
        return {**result, "reward": float(answer.abstained), "correct": answer.abstained}
    wanted = gold_result(gold)
    if answer.stop_reason == "max_actions" or wanted is None:
        correct = False
    elif (not answer.free_text and answer.answer_text is not None and gold.answer_text is not None
          and answer.answer_text == gold.answer_text):
        correct = True
    elif kind == "adapt":
        golds = gold_answers(wanted)
        correct = any(adapt_matches(reply, golds) for reply in replies)
    else:
        results = sql_execute_results(answer.transcript)
        if answer.answer_rows is not None:
            results.append(answer.answer_rows)
        correct = any(incre_matches(result_rows(rows), wanted) for rows in results)
    return {**result, "reward": float(correct), "correct": correct}
