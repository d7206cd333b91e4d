"""Protocol `fhir_agentbench`: FHIR-AgentBench's two scores of a question (arXiv:2509.19319; ehrbench's rules,
unchanged, docs/benchmarks.md#fhir-retrieval-precision-and-recall):

- answer correctness: an abstention is right only on an unanswerable question; the model's own words (`free_text`)
  go to the answer judge (the normalised match, then an LLM judge when one is configured), rows or an answer string
  are compared with EHRSQL-2024's comparison (`ehrbench.ehrsql.answers_match`);
- retrieval precision and recall of the resource ids the agent retrieved against the gold ids
  (`ehrbench.metrics.retrieval`, with its edge cases).
"""

from __future__ import annotations

from typing import Protocol

from ehrbench.ehrsql.scoring import answers_match
from ehrbench.llm.tool_chat import Usage
from ehrbench.metrics.retrieval import ids_by_type, published_retrieval_score, retrieval_score
from ehrbench.scoring.ehrsql2024 import display_answer
from ehrbench.scoring.fhir_agentbench_judge import published_correct
from ehrbench.scoring.judge_cost import judge_spent
from ehrbench.tasks import AgentAnswer, EvalTask

PROTOCOL = "fhir_agentbench"


class Judgement(Protocol):
    correct: bool
    method: str


class Judge(Protocol):
    """What judges a free-text answer (`ehrbench.evaluation.judge.AnswerJudge`)."""

    def judge(self, question: str, gold_answer_text: str, predicted: str | list | None) -> Judgement: ...


def score_trial(task: EvalTask, answer: AgentAnswer, judge: Judge | None = None) -> dict:
    """reward and correct of the answer, and the retrieval scores. Without a judge a free-text answer is compared
    like an answer string."""
    gold = task.gold
    text = display_answer(answer)
    scored: dict = {"answer": text}
    spent = Usage()  # the judges' tokens: ehrbench's judge, then FHIR-AgentBench's
    if answer.abstained:
        correct = not gold.is_answerable
    elif not gold.is_answerable or text is None or gold.answer_text is None:
        correct = False
    elif answer.free_text and judge is not None:
        judgement = judge.judge(task.view.instruction, gold.answer_text, text)
        correct = judgement.correct
        scored["answer_judge"] = judgement.method
        spent += judgement.usage
    else:
        correct = answers_match(text, gold.answer_text)
    retrieval = retrieval_score(answer.fhir_ids, gold.fhir_ids)
    scored.update(reward=float(correct), correct=correct, retrieval_precision=retrieval.precision,
                  retrieval_recall=retrieval.recall, retrieved_fhir_ids=sorted({str(i) for i in answer.fhir_ids}))
    model = getattr(judge, "model", None)
    published = _published(task, answer, text, model)
    spent += published.pop("usage")
    scored.update(published, **judge_spent(model, spent))
    return scored


def _published(task: EvalTask, answer: AgentAnswer, text: str | None, model) -> dict:
    """FHIR-AgentBench's own scores beside ehrbench's: its judge's verdict (`published_correct`) and its retrieval
    precision and recall (over the gold's resource types; binary recall). An abstention is its "cannot find"."""
    gold = task.gold
    by_gold_type = ids_by_type(zip(gold.fhir_types or ("",) * len(gold.fhir_ids), gold.fhir_ids, strict=True))
    predicted = answer.fhir_ids_by_type
    if predicted is None or not gold.fhir_types:  # no types on one side: every retrieved id is of the gold's type
        predicted = {kind: list(answer.fhir_ids) for kind in by_gold_type} if by_gold_type else {}
    retrieval = published_retrieval_score(predicted, by_gold_type)
    said = "I cannot find the information." if answer.abstained else text
    verdict = published_correct(task.view.instruction, gold.published_answer or gold.answer_text, not gold.fhir_ids,
                                said, model, gold_answer_text=gold.answer_text)
    return {"published_correct": verdict.correct, "published_judge": verdict.method,
            "published_retrieval_precision": retrieval.precision, "published_retrieval_recall": retrieval.recall,
            "usage": verdict.usage}
