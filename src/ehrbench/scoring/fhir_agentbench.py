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
from ehrbench.metrics.retrieval import retrieval_score
from ehrbench.scoring.ehrsql2024 import display_answer
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
    if answer.abstained:
        correct = not gold.is_answerable
    elif not gold.is_answerable or text is None or gold.answer_text is None:
        correct = False
    elif answer.free_text and judge is not None:
        judgement = judge.judge(task.view.instruction, gold.answer_text, text)
        correct = judgement.correct
        scored["answer_judge"] = judgement.method
    else:
        correct = answers_match(text, gold.answer_text)
    retrieval = retrieval_score(answer.fhir_ids, gold.fhir_ids)
    scored.update(reward=float(correct), correct=correct, retrieval_precision=retrieval.precision,
                  retrieval_recall=retrieval.recall, retrieved_fhir_ids=sorted({str(i) for i in answer.fhir_ids}))
    return scored
