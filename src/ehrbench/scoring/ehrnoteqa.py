"""Protocol `ehrnoteqa`: EHRNoteQA's verdict on one answer (docs/benchmarks.md#ehrnoteqa-accuracy), from
ji-youn-kim/EHRNoteQA `src/evaluation/evaluate.py`: a judge model (published: gpt-4-1106-preview, temperature 0, one
call, at most 600 tokens) reads the answer beside the correct option, for multiple-choice too, and says "yes"/"no"
(multiple-choice) or "Score: 1"/"Score: 0" (open-ended). A reply that says neither is wrong.

`votes` > 1 asks the judge that many times and takes the majority of its verdicts (a tie, or unread replies, are
wrong); the published protocol is one vote. Without a judge model, ehrbench stands in with a recorded `method`:
multiple-choice reads the first standalone letter A-E of the answer (`letter`); open-ended asks that the correct
option's text appear in the answer, case and spacing aside (`match`). Neither is the published judge: results say
which was used.

`score_trial` scores a trial of the `noteqa` suite this way: the view's notes block, question, options (as the trial
showed them) and format, the gold's letter among those options; an abstention is no answer (wrong)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ehrbench.llm.tool_chat import ToolChatModel, Usage
from ehrbench.noteqa.published import LETTERS, MAX_NEW_TOKENS, Format, judge_prompt, judge_verdict
from ehrbench.noteqa.text import first_letter, plain
from ehrbench.scoring.judge_cost import judge_spent
from ehrbench.tasks import AgentAnswer, EvalTask

PROTOCOL = "ehrnoteqa"



@dataclass(frozen=True)
class NoteQaJudgement:
    correct: bool
    method: str  # error | no_answer | llm | letter | match
    replies: tuple[str, ...]  # the judge's replies, as it wrote them
    usage: Usage


def published_correct(kind: Format, *, answer_text: str | None, question: str, notes: str, choices: Sequence[str],
                      answer: str, model: ToolChatModel | None = None, votes: int = 1,
                      error: str | None = None) -> NoteQaJudgement:
    """The verdict on `answer_text` (the evaluated model's free text) for a question whose correct option is the
    letter `answer`. `notes` is the question's notes block (the open-ended judge reads it)."""
    if votes < 1:
        raise ValueError(f"judge votes must be >= 1, got {votes}")
    if error:
        return NoteQaJudgement(False, "error", (), Usage())
    if answer_text is None or not answer_text.strip():
        return NoteQaJudgement(False, "no_answer", (), Usage())
    if model is None:
        if kind == "multichoice":
            return NoteQaJudgement(first_letter(answer_text) == answer, "letter", (), Usage())
        correct_text = plain(choices[LETTERS.index(answer)])
        return NoteQaJudgement(bool(correct_text) and correct_text in plain(answer_text), "match", (), Usage())
    request = judge_prompt(kind, output=answer_text, question=question, notes=notes, choices=choices, answer=answer)
    replies, usage, right = [], Usage(), 0
    for _ in range(votes):
        turn = model.chat([{"role": "user", "content": request}], [], temperature=0.0, max_tokens=MAX_NEW_TOKENS)
        usage += turn.usage
        reply = (turn.text or "").strip()
        replies.append(reply)
        right += judge_verdict(kind, reply) is True
    return NoteQaJudgement(right * 2 > votes, "llm", tuple(replies), usage)


def score_trial(task: EvalTask, answer: AgentAnswer, model: ToolChatModel | None = None, votes: int = 1) -> dict:
    """The result-row fields of a noteqa trial: reward and correct from the judge's verdict, how it was reached."""
    view, gold = task.view, task.gold
    if view.qa_format is None or gold.published_answer is None:
        raise ValueError(f"task {view.suite}/{view.task_id} has no EHRNoteQA format or answer letter")
    text = None if answer.abstained else answer.answer_text
    verdict = published_correct(view.qa_format, answer_text=text, question=view.instruction,
                                notes=view.notes or "", choices=view.choices, answer=gold.published_answer,
                                model=model, votes=votes)
    return {"reward": float(verdict.correct), "correct": verdict.correct, "answer": text,
            "answer_judge": verdict.method, "published_correct": verdict.correct, "published_judge": verdict.method,
            **judge_spent(model, verdict.usage)}

