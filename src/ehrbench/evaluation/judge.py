"""Correctness of a free-text answer (FHIR questions): the normalised match first, an LLM judge for the rest.

`AnswerJudge.judge` accepts at once what `metrics.answers.answer_matches` accepts (no model call, zero usage): the
rules are deterministic and free. Only an answer the rules reject goes to the model, which can see what rules cannot
("no admissions in that period" for an empty gold, "December 20, 2100" for 2100-12-20). The model answers a JSON
verdict at temperature 0; a reply without a readable verdict falls back to the rules' "no" (method "match"), so a
judge that rambles never turns a wrong answer right. A model endpoint that fails raises ChatError: the trial is an
error, not a wrong answer.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

from ehrbench.llm.chat import endpoint_name
from ehrbench.llm.tool_chat import ToolChatModel, Usage
from ehrbench.llm.verdicts import verdict
from ehrbench.metrics.answers import answer_matches

JUDGE_SYSTEM_PROMPT = """\
You grade answers to questions over a patient's electronic health record. You are given the question, the \
correct answer (the rows a reference SQL query returned) and a predicted answer written by an assistant. \
Decide whether the predicted answer states the same result as the correct answer.

Rules:
- Judge the result only, not the wording, the explanation or the reasoning.
- Numbers must agree when rounded to 3 decimals; units may be added or omitted.
- Times are local wall-clock times; the predicted answer may write them in another format (ISO with "T" and the \
-04:00 offset, words) but must give the same date and time, to the precision the correct answer has.
- A correct answer of 1 or 0 to a yes/no question means yes or no.
- When the correct answer has several values, the predicted answer must give all of them and no others (order does \
not matter).
- When the correct answer has no rows, the predicted answer is correct only if it says there is no such record or \
value.
- An answer that hedges between alternatives, or gives the right value next to a wrong one, is incorrect.

Reply with one JSON object and nothing else: {"correct": true or false, "reason": "<one short sentence>"}"""

JUDGE_REQUEST = """\
Question: {question}

Correct answer ({row_count}):
{gold}

Predicted answer:
{predicted}"""


@dataclass(frozen=True)
class Judgement:
    correct: bool
    reason: str
    usage: Usage
    method: str  # "llm" (the model's verdict) | "match" (answer_matches decided)


class AnswerJudge:
    """Judges free-text answers against an EHRSQL-2024 gold answer string. Without a model it is the normalised match
    alone."""

    def __init__(self, model: ToolChatModel | None = None, votes: int = 1):
        if votes < 1:
            raise ValueError(f"judge votes must be >= 1, got {votes}")
        self.model = model
        self.votes = votes  # EHRNoteQA's judge (protocol ehrnoteqa) is asked this many times, the majority wins

    def judge(self, question: str, gold_answer_text: str, predicted: str | list | None) -> Judgement:
        if predicted is None:
            return Judgement(False, "no answer was given", Usage(), "match")
        if answer_matches(predicted, gold_answer_text):
            return Judgement(True, "the answer matches the gold answer under the normalisation rules", Usage(),
                             "match")
        if self.model is None:
            return Judgement(False, "the answer does not match the gold answer under the normalisation rules",
                             Usage(), "match")

        request = JUDGE_REQUEST.format(question=question, predicted=_render_predicted(predicted),
                                       **_render_gold(gold_answer_text))
        turn = self.model.chat([{"role": "system", "content": JUDGE_SYSTEM_PROMPT},
                                {"role": "user", "content": request}], [], temperature=0.0)
        found = verdict(turn.text, "correct")
        if found is None:
            # the rules already said no; the tokens were spent all the same
            return Judgement(False, f"unreadable judge reply from {endpoint_name(self.model)}, fell back to the "
                                    f"normalised match: {turn.text!r}",
                             turn.usage, "match")
        correct, answer = found
        return Judgement(correct, str(answer.get("reason") or "").strip(), turn.usage, "llm")


def _render_gold(gold_answer_text: str) -> dict[str, str]:
    """The gold rows as lines of cells (as stored, so the judge sees '1'/'0' and units-free numbers as the gold has
    them); several columns are joined by " | " to keep each row's values together."""
    rows = ast.literal_eval(gold_answer_text)
    if not rows:
        return {"row_count": "no rows", "gold": "(none: there is no such record or value)"}
    lines = [" | ".join(str(cell) for cell in row) for row in rows]
    return {"row_count": "1 row" if len(rows) == 1 else f"{len(rows)} rows", "gold": "\n".join(lines)}


def _render_predicted(predicted: str | list) -> str:
    if isinstance(predicted, str):
        return predicted.strip() or "(empty)"
    return json.dumps(predicted, default=str, ensure_ascii=False)
