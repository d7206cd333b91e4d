"""FHIR-AgentBench's answer correctness (glee4810/FHIR-AgentBench `evaluation_metrics.py`:
`normalize_null_answers_with_llm`, `worker_check_correctness`; docs/benchmarks.md#fhir-agentbench-answer-correctness),
kept beside ehrbench's stricter judge (`ehrbench.evaluation.judge`) as the trial's `published_correct`:

1. a trial error, or an answer saying "Input tokens exceeded", is wrong;
2. the judge model first sorts the answer into "no answer" or "question answered"; when the gold is "no answer" (the
   question's gold ids are empty, whatever its answer rows) and the answer is "no answer", it is right;
3. no answer text is wrong;
4. otherwise the judge model compares the whole answer text with the published answer under the published rubric's
   leniency (numbers rounded to integers, a date for a timestamp, 0 for nothing found, extra correct detail allowed).

The rubric below states the published rules; its worked examples are ehrbench's. Without a judge model, step 2 reads
"no answer" from the text's own words and step 4 is ehrbench's normalised match (`method` "match")."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ehrbench.llm.tool_chat import ToolChatModel, Usage
from ehrbench.metrics.answers import answer_matches

NO_ANSWER = "no answer"
ANSWERED = "question answered"
TOKENS_EXCEEDED = "Input tokens exceeded"
READ_ATTEMPTS = 3  # the published loop asks until it reads 0 or 1; a judge that never does is wrong here

NORMALIZE_PROMPT = """\
Classify the model answer below. Reply with exactly one of these two phrases and nothing else:
- no answer: the answer says the information could not be found, that there is no such record, or gives nothing.
- question answered: the answer gives a value, a list, a yes or a no, or any other result.

Example: "I cannot find any lab results for this patient." -> no answer
Example: "The final answer is: 2" -> question answered

Model answer: {answer}"""

JUDGE_PROMPT = """\
You are a helpful assistant that evaluates whether a model answer to a question is correct, by comparing it to the \
true answer. Return 1 if the model answer is correct and 0 if it is not. Never return anything other than 0 or 1. \
Focus on correctness of content, not exact formatting.

Rules:
1. If the true answer is [] or 'null' or 'no answer', this means there is no answer or the answer is effectively 0. \
If the model gives any conflicting or non-empty answer, return 0. If the model also implies no answer, or returns 0 \
for numerical questions, return 1.
2. A true answer of [[0]] means No and [[1]] means Yes: evaluate the meaning, not the syntax.
3. Numbers: match on value, rounding both sides to the nearest integer, except for days (which should be rounded to \
the nearest whole day). Be lenient if the model answer has the true answer in the breakdown but returns a different \
total aggregated value. Ignore decimal formatting and units.
4. Dates and times: you can ignore time and timezone differences unless specifically stated in the question. A time \
difference of up to a minute is acceptable.
5. Lists: the model answer must include all listed values and no extra medical values.
6. Extra correct detail or explanation in the model answer is fine.
7. Be lenient with formatting.

Examples:
- Question: How many lab tests did the patient have? True answer: [[12]]. Model answer: The final answer is: 12 \
tests. -> 1
- Question: When was the last admission? True answer: [['2133-12-31 02:00:00']]. Model answer: December 31, 2133. \
-> 1
- Question: What was the average heart rate? True answer: [[81.4]]. Model answer: 81 bpm. -> 1
- Question: Did the patient have a procedure? True answer: [[1]]. Model answer: No procedure was found. -> 0
- Question: How many times was aspirin prescribed? True answer: no answer. Model answer: 0 -> 1

- Question: {question}
- True answer: {ref_answer}
- Model answer: {answer}

Return only 0 or 1. Do not explain your reasoning."""

_NO_INFORMATION = re.compile(r"\b(cannot|can't|could not|couldn't|unable to|no (?:record|data|information|result)s?"
                             r"|not (?:found|available|find))\b", re.IGNORECASE)


@dataclass(frozen=True)
class PublishedJudgement:
    correct: bool
    method: str  # error | tokens_exceeded | no_answer | llm | match
    usage: Usage


def published_correct(question: str, true_answer: str | None, gold_ids_empty: bool, answer: str | None,
                      model: ToolChatModel | None = None, error: str | None = None,
                      gold_answer_text: str | None = None) -> PublishedJudgement:
    """FHIR-AgentBench's verdict on one answer (see the module's steps). `gold_answer_text`: the gold rows as
    EHRSQL-2024's answer string, for the match that stands in for the judge model when there is none."""
    usage = Usage()
    if error:
        return PublishedJudgement(False, "error", usage)
    if answer is not None and TOKENS_EXCEEDED in answer:
        return PublishedJudgement(False, "tokens_exceeded", usage)
    truth = NO_ANSWER if gold_ids_empty else (true_answer or "")
    if answer is not None and truth == NO_ANSWER:
        normalized, spent = _normalize(answer, model)
        usage += spent
        if re.sub(r"[^\w\s]", "", normalized).strip().lower() == NO_ANSWER:
            return PublishedJudgement(True, "no_answer", usage)
    if answer is None:
        return PublishedJudgement(False, "no_answer", usage)
    if model is None:  # rule 1 (nothing, or 0, for "no answer"), else the normalised match
        if truth == NO_ANSWER:
            return PublishedJudgement(_says_nothing(answer), "match", usage)
        return PublishedJudgement(answer_matches(answer, gold_answer_text or truth), "match", usage)
    request = JUDGE_PROMPT.format(question=question, ref_answer=truth, answer=answer)
    for _ in range(READ_ATTEMPTS):
        turn = model.chat([{"role": "user", "content": request}], [], temperature=0.0)
        usage += turn.usage
        reply = (turn.text or "").strip().strip("'")
        if reply in ("0", "1"):
            return PublishedJudgement(reply == "1", "llm", usage)
    return PublishedJudgement(False, "llm", usage)


def _says_nothing(answer: str) -> bool:
    """An answer that reports nothing: no-information words, or an empty, null, zero or "no" result."""
    bare = re.sub(r"[\s\[\]'\"]", "", answer).lower().removeprefix("thefinalansweris:")
    return bool(_NO_INFORMATION.search(answer)) or bare in ("", "none", "null", "nan", "0", "0.0", "no")


def _normalize(answer: str, model: ToolChatModel | None) -> tuple[str, Usage]:
    """"no answer" or "question answered" (the published default when the model fails: answered)."""
    if model is None:
        return (NO_ANSWER if _says_nothing(answer) else ANSWERED), Usage()
    turn = model.chat([{"role": "user", "content": NORMALIZE_PROMPT.format(answer=answer)}], [], temperature=0.0)
    return (turn.text or ANSWERED), turn.usage
